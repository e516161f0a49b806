'use strict';
'require baseclass';

/*
 * Line charts in SVG for the sqmkit pages: the router has no plot
 * renderer, so the browser draws the series the plugin sends.
 */

var NS = 'http://www.w3.org/2000/svg';

function svg(tag, attrs, children) {
	var el = document.createElementNS(NS, tag);
	for (var k in attrs)
		el.setAttribute(k, attrs[k]);
	(children || []).forEach(function(c) {
		el.appendChild(typeof(c) == 'string' ? document.createTextNode(c) : c);
	});
	return el;
}

/* a round step for about n ticks between 0 and max */
function step(max, n) {
	var raw = max / n, p = Math.pow(10, Math.floor(Math.log10(raw || 1)));
	var m = [1, 2, 5, 10].find(function(m) { return m * p >= raw; });
	return m * p;
}

return baseclass.extend({
	colors: ['#1f77b4', '#ff7f0e', '#2ca02c', '#d62728', '#9467bd', '#8c564b'],

	/*
	 * draw(title, unit, series, opts): series are { name, points: [[x, y], ...] };
	 * opts.bands are { name, from, to } shaded behind the lines (test phases),
	 * opts.xlabel names the x axis, opts.clip caps the y axis (outliers).
	 */
	draw: function(title, unit, series, opts) {
		opts = opts || {};
		var w = 760, h = 220, l = 56, r = 12, t = 26, b = 34;
		var xmin = Infinity, xmax = -Infinity, ymax = 0;
		series.forEach(function(s) {
			s.points.forEach(function(p) {
				xmin = Math.min(xmin, p[0]);
				xmax = Math.max(xmax, p[0]);
				ymax = Math.max(ymax, p[1]);
			});
		});
		if (!isFinite(xmin)) {
			xmin = 0;
			xmax = 1;
		}
		if (opts.clip && ymax > opts.clip)
			ymax = opts.clip;
		var ys = step(ymax || 1, 4), ytop = Math.ceil((ymax || 1) / ys) * ys;
		var X = function(x) { return l + (x - xmin) / ((xmax - xmin) || 1) * (w - l - r); };
		var Y = function(y) { return t + (1 - Math.min(y, ytop) / ytop) * (h - t - b); };
		var nodes = [svg('text', { x: l, y: 16, 'font-size': 13, 'font-weight': 'bold' }, [title])];

		(opts.bands || []).forEach(function(band, i) {
			nodes.push(svg('rect', { x: X(band.from), y: t, width: Math.max(0, X(band.to) - X(band.from)), height: h - t - b,
				fill: i % 2 ? '#f2f2f2' : '#e8eef7' }));
			nodes.push(svg('text', { x: X(band.from) + 3, y: t + 11, 'font-size': 10, fill: '#555' }, [band.name]));
		});
		for (var v = 0; v <= ytop + 1e-9; v += ys) {
			nodes.push(svg('line', { x1: l, x2: w - r, y1: Y(v), y2: Y(v), stroke: '#ccc', 'stroke-width': 0.5 }));
			nodes.push(svg('text', { x: l - 4, y: Y(v) + 4, 'font-size': 10, 'text-anchor': 'end' }, [String(+v.toFixed(3))]));
		}
		var xs = step(xmax - xmin || 1, 8);
		for (var x = Math.ceil(xmin / xs) * xs; x <= xmax + 1e-9; x += xs)
			nodes.push(svg('text', { x: X(x), y: h - b + 14, 'font-size': 10, 'text-anchor': 'middle' }, [String(+x.toFixed(3))]));
		nodes.push(svg('text', { x: (l + w - r) / 2, y: h - 4, 'font-size': 11, 'text-anchor': 'middle' }, [opts.xlabel || '']));
		nodes.push(svg('text', { x: 12, y: (t + h - b) / 2, 'font-size': 11, 'text-anchor': 'middle',
			transform: 'rotate(-90 12 %d)'.format((t + h - b) / 2) }, [unit]));

		series.forEach(function(s, i) {
			var d = s.points.map(function(p, j) { return (j ? 'L' : 'M') + X(p[0]).toFixed(1) + ' ' + Y(p[1]).toFixed(1); }).join('');
			var color = s.color || this.colors[i % this.colors.length];
			nodes.push(svg('path', { d: d, fill: 'none', stroke: color, 'stroke-width': 1.5, 'class': 'sqmkit-series', 'data-name': s.name }));
			nodes.push(svg('text', { x: w - r - 4, y: t + 12 + 13 * i, 'font-size': 11, 'text-anchor': 'end', fill: color }, [s.name]));
		}, this);

		return svg('svg', { viewBox: '0 0 %d %d'.format(w, h), width: '100%', 'class': 'sqmkit-chart', role: 'img', 'aria-label': title }, nodes);
	}
});
