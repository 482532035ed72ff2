"""Host tuning for shmq (import name ``shmq_tuning``).

Profiles that check and apply host settings (huge pages, mlock limits, CPU governor, dirty
page writeback, ``/dev/shm`` size) arrive with their own issue; nothing is here yet.
"""
