"""The admin client's message tools: queries by key, id and offset (``queries``), browsing a
queue (``browse``), dead-letter queues and their resend (``dlq``), open transactions
(``transactions``) and send round trips (``send_rt``); ``Admin`` delegates to them."""
