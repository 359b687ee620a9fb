// Charts of query results with uPlot: lines for series over time (PromQL ranges, date
// histograms, SQL time buckets), bars for groups (terms, GROUP BY), a big number for one value.

import {html, useEffect, useRef} from './vendor/preact-htm.js';
import uPlot from './vendor/uplot.js';

const COLORS = ['#0b5cad', '#c4432b', '#2f8f46', '#8a3ffc', '#b8860b', '#00838f', '#d0368a', '#5c6bc0'];

/**
 * What a result is best drawn as: {kind: 'line', x: [seconds], series: [{label, values}]},
 * {kind: 'bar', labels, values, label}, {kind: 'number', value, label}, or null.
 */
export function chartOf(result) {
  if (!result) return null;
  // PromQL: a matrix is lines, a vector bars (or a number when it has one sample).
  if (result.resultType === 'matrix') {
    const times = [...new Set(result.result.flatMap((s) => s.values.map((v) => v[0])))].sort((a, b) => a - b);
    const series = result.result.map((s) => {
      const at = new Map(s.values.map((v) => [v[0], Number(v[1])]));
      return {label: seriesName(s.metric), values: times.map((t) => (at.has(t) ? at.get(t) : null))};
    });
    return {kind: 'line', x: times, series};
  }
  if (result.resultType === 'vector') {
    if (result.result.length === 1) return {kind: 'number', value: Number(result.result[0].value[1]), label: seriesName(result.result[0].metric)};
    return {kind: 'bar', labels: result.result.map((s) => seriesName(s.metric)), values: result.result.map((s) => Number(s.value[1])), label: 'value'};
  }
  if (result.resultType === 'scalar') return {kind: 'number', value: Number(result.result[1]), label: 'scalar'};
  // A table: {columns: [{name, type}], rows}.
  const {columns, rows} = result;
  if (!columns || !rows || rows.length === 0) return null;
  const numeric = columns.map((c, i) => rows.every((r) => r[i] === null || typeof r[i] === 'number'));
  if (rows.length === 1 && columns.length === 1 && numeric[0]) return {kind: 'number', value: rows[0][0], label: columns[0].name};
  const dateColumn = columns.findIndex((c) => c.type === 'date');
  const valueColumn = numeric.findIndex((n, i) => n && i !== dateColumn);
  if (valueColumn < 0) return null;
  if (dateColumn >= 0) {
    const points = rows.map((r) => [Date.parse(r[dateColumn]) / 1000, r[valueColumn]]).filter((p) => !Number.isNaN(p[0])).sort((a, b) => a[0] - b[0]);
    return {kind: 'line', x: points.map((p) => p[0]), series: [{label: columns[valueColumn].name, values: points.map((p) => p[1])}]};
  }
  const labelColumn = columns.findIndex((c, i) => !numeric[i]);
  if (labelColumn < 0 || rows.length > 100) return null;
  return {kind: 'bar', labels: rows.map((r) => String(r[labelColumn])), values: rows.map((r) => r[valueColumn]), label: columns[valueColumn].name};
}

function seriesName(metric) {
  const {__name__: name = '', ...labels} = metric || {};
  const inner = Object.entries(labels).map(([k, v]) => `${k}="${v}"`).join(', ');
  return inner ? `${name}{${inner}}` : name || '{}';
}

function options(chart, width) {
  const bars = chart.kind === 'bar';
  const series = bars
    ? [{}, {label: chart.label, stroke: COLORS[0], fill: COLORS[0] + '99', paths: uPlot.paths.bars({size: [0.6, 60]}), points: {show: false}}]
    : [{}, ...chart.series.map((s, i) => ({label: s.label, stroke: COLORS[i % COLORS.length], width: 2, spanGaps: true}))];
  const axes = bars
    ? [{values: (_, ticks) => ticks.map((t) => chart.labels[t] ?? ''), stroke: 'currentColor', grid: {show: false}, gap: 6}, {stroke: 'currentColor'}]
    : [{stroke: 'currentColor'}, {stroke: 'currentColor'}];
  return {
    width,
    height: 320,
    series,
    axes,
    scales: {x: {time: !bars, distr: bars ? 2 : 1}},
    legend: {show: true},
  };
}

/** The chart of `chart` (from chartOf), drawn into a canvas that follows its box's width. */
export function Chart({chart}) {
  const box = useRef(null);
  useEffect(() => {
    if (!chart || chart.kind === 'number' || !box.current) return undefined;
    const data = chart.kind === 'bar'
      ? [chart.labels.map((_, i) => i), chart.values]
      : [chart.x, ...chart.series.map((s) => s.values)];
    const plot = new uPlot(options(chart, box.current.clientWidth || 600), data, box.current);
    const resized = new ResizeObserver(() => plot.setSize({width: box.current.clientWidth, height: 320}));
    resized.observe(box.current);
    return () => {
      resized.disconnect();
      plot.destroy();
    };
  }, [chart]);
  if (!chart) return html`<p>This result has no chart: it is not one value, groups or a series over time.</p>`;
  if (chart.kind === 'number') {
    return html`<figure class="big-number"><figcaption>${chart.label}</figcaption><output>${formatNumber(chart.value)}</output></figure>`;
  }
  return html`<figure class="chart" role="img" aria-label=${chart.kind === 'bar' ? 'Bar chart' : 'Line chart'}><div ref=${box}></div></figure>`;
}

export function formatNumber(value) {
  return typeof value === 'number' ? value.toLocaleString(undefined, {maximumFractionDigits: 6}) : String(value);
}
