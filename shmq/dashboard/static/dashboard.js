// The dashboard's only script: confirm destructive forms, and draw the live charts of the
// cluster page from /api/live (polled every 2 s) on plain canvases.
"use strict";

document.querySelectorAll("form[data-confirm]").forEach((form) => {
  form.addEventListener("submit", (event) => {
    if (!window.confirm(form.dataset.confirm)) event.preventDefault();
  });
});

const COLORS = ["#1769aa", "#2e7d32", "#c2571a", "#8e24aa", "#00838f", "#b3261e"];

// series: {name: [[t, value], ...]}; draws lines on a shared time axis, a legend and the max.
function draw(canvas, series) {
  const ctx = canvas.getContext("2d");
  const w = canvas.width, h = canvas.height, pad = 34;
  ctx.clearRect(0, 0, w, h);
  const points = Object.values(series).flat();
  ctx.font = "11px system-ui, sans-serif";
  ctx.fillStyle = "#687683";
  if (points.length < 2) {
    ctx.fillText("collecting… (a point every 2 s while this page is open)", pad, h / 2);
    return;
  }
  const t0 = Math.min(...points.map((p) => p[0])), t1 = Math.max(...points.map((p) => p[0]));
  const top = Math.max(1, ...points.map((p) => p[1]));
  const x = (t) => pad + ((t - t0) / Math.max(1, t1 - t0)) * (w - pad - 8);
  const y = (v) => h - 18 - (v / top) * (h - 34);
  ctx.strokeStyle = "#d9e0e6";
  ctx.beginPath(); ctx.moveTo(pad, y(0)); ctx.lineTo(w - 8, y(0)); ctx.moveTo(pad, y(top));
  ctx.lineTo(w - 8, y(top)); ctx.stroke();
  ctx.fillText(top.toLocaleString(undefined, {maximumFractionDigits: 1}), 2, y(top) + 4);
  ctx.fillText("0", 2, y(0) + 4);
  ctx.fillText(`${Math.round((t1 - t0) / 1000)} s`, w - 40, h - 4);
  Object.entries(series).forEach(([name, line], i) => {
    ctx.strokeStyle = ctx.fillStyle = COLORS[i % COLORS.length];
    ctx.lineWidth = 2;
    ctx.beginPath();
    line.forEach(([t, v], j) => (j ? ctx.lineTo(x(t), y(v)) : ctx.moveTo(x(t), y(v))));
    ctx.stroke();
    ctx.fillText(name, pad + 8 + i * 110, 12);
  });
}

// Sums of every broker's points, by chart line.
function collect(brokers) {
  const rates = {in: {}, out: {}}, lag = {};
  for (const broker of Object.values(brokers)) {
    for (const p of broker.points) {
      const t = Math.round(p.t / 1000) * 1000;
      for (const key of ["in", "out"]) {
        if (p[key] !== null) rates[key][t] = (rates[key][t] || 0) + p[key];
      }
      for (const [group, n] of Object.entries(p.lag)) {
        const byTime = (lag[group] = lag[group] || {});
        byTime[t] = (byTime[t] || 0) + n;
      }
    }
  }
  const lines = (by) => Object.entries(by).map(([t, v]) => [Number(t), v]).sort((a, b) => a[0] - b[0]);
  return {
    rates: {"in msg/s": lines(rates.in), "out msg/s": lines(rates.out)},
    lag: Object.fromEntries(Object.entries(lag).map(([g, by]) => [g, lines(by)])),
  };
}

const rateChart = document.getElementById("chart-rates");
const lagChart = document.getElementById("chart-lag");
if (rateChart && lagChart) {
  const refresh = async () => {
    try {
      const answer = await fetch("/api/live", {credentials: "same-origin"});
      if (!answer.ok) return;
      const brokers = await answer.json();
      const {rates, lag} = collect(brokers);
      draw(rateChart, rates);
      draw(lagChart, lag);
      for (const [name, b] of Object.entries(brokers)) {
        const row = document.querySelector(`tr[data-broker="${CSS.escape(name)}"]`);
        if (!row) continue;
        const fmt = (v) => (v === null ? "-" : v.toLocaleString(undefined, {minimumFractionDigits: 1, maximumFractionDigits: 1}));
        row.querySelector(".in").textContent = fmt(b.in);
        row.querySelector(".out").textContent = fmt(b.out);
      }
    } catch (err) {
      console.warn("live refresh failed", err);
    }
  };
  refresh();
  setInterval(refresh, 2000);
}
