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

/* the width a text of n characters takes at size px, about */
function textWidth(text, px) {
	return String(text).length * px * 0.6;
}

/* lines of at most width px at size px, broken between words */
function wrap(text, width, px) {
	var lines = [], line = '';
	String(text).split(' ').forEach(function(word) {
		var next = line ? line + ' ' + word : word;
		if (line && textWidth(next, px) > width) {
			lines.push(line);
			line = word;
		} else {
			line = next;
		}
	});
	return lines.concat(line ? [ line ] : []);
}

return baseclass.extend({
	colors: ['#1f77b4', '#ff7f0e', '#2ca02c', '#d62728', '#9467bd', '#8c564b'],

	/* text size in px; the drawing is as wide as the page, so it is the
	 * size on screen, on a phone too (TestChartsOnAPhone) */
	px: 12,

	/*
	 * draw(title, unit, series, opts): series are { name, points: [[x, y], ...] };
	 * opts.bands are { name, from, to } shaded behind the lines (test phases),
	 * opts.xlabel names the x axis, opts.clip caps the y axis (outliers).
	 * The title, the phase names and the legend each have rows of their
	 * own, so none covers another or a line.
	 */
	draw: function(title, unit, series, opts) {
		opts = opts || {};
		var px = this.px, row = px + 4;
		var view = document.getElementById('view') || document.body;
		var w = Math.round(Math.max(280, Math.min(760, (view.clientWidth || 760) - 8)));
		var l = 8 + px * 4, r = 10;
		var nodes = [];
		var y = 2;
		wrap(title, w - 2 * r, px + 2).forEach(function(line) {
			y += row + 2;
			nodes.push(svg('text', { x: r, y: y, 'font-size': px + 2, 'font-weight': 'bold' }, [line]));
		});
		var bands = opts.bands || [];
		var bandTop = y + 4, t = bandTop + (bands.length ? 2 * row : 0) + 4, ph = 150, b = t + ph;
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
		var Y = function(v) { return t + (1 - Math.min(v, ytop) / ytop) * ph; };

		bands.forEach(function(band, i) {
			nodes.push(svg('rect', { x: X(band.from), y: t, width: Math.max(0, X(band.to) - X(band.from)), height: ph,
				fill: i % 2 ? '#f2f2f2' : '#e8eef7' }));
			// neighbours' names on alternate rows above the plot: a short
			// phase's name does not run into the next one's
			nodes.push(svg('text', { x: X(band.from) + 2, y: bandTop + row * (1 + i % 2) - 3, 'font-size': px, fill: '#555', 'class': 'sqmkit-band' }, [band.name]));
		});
		for (var v = 0; v <= ytop + 1e-9; v += ys) {
			nodes.push(svg('line', { x1: l, x2: w - r, y1: Y(v), y2: Y(v), stroke: '#ccc', 'stroke-width': 0.5 }));
			nodes.push(svg('text', { x: l - 4, y: Y(v) + 4, 'font-size': px, 'text-anchor': 'end' }, [String(+v.toFixed(3))]));
		}
		var xs = step(xmax - xmin || 1, Math.max(3, Math.floor((w - l - r) / (px * 6))));
		for (var x = Math.ceil(xmin / xs) * xs; x <= xmax + 1e-9; x += xs)
			nodes.push(svg('text', { x: X(x), y: b + row, 'font-size': px, 'text-anchor': 'middle' }, [String(+x.toFixed(3))]));
		nodes.push(svg('text', { x: (l + w - r) / 2, y: b + 2 * row, 'font-size': px, 'text-anchor': 'middle' }, [opts.xlabel || '']));
		nodes.push(svg('text', { x: px, y: t + ph / 2, 'font-size': px, 'text-anchor': 'middle',
			transform: 'rotate(-90 %d %d)'.format(px, t + ph / 2) }, [unit]));

		// the legend: rows of its own under the axis
		var lx = l, ly = b + 3 * row + 2;
		series.forEach(function(s, i) {
			var d = s.points.map(function(p, j) { return (j ? 'L' : 'M') + X(p[0]).toFixed(1) + ' ' + Y(p[1]).toFixed(1); }).join('');
			var color = s.color || this.colors[i % this.colors.length];
			nodes.push(svg('path', { d: d, fill: 'none', stroke: color, 'stroke-width': 1.5, 'class': 'sqmkit-series', 'data-name': s.name }));
			var item = 18 + textWidth(s.name, px) + 12;
			if (lx > l && lx + item > w - r) {
				lx = l;
				ly += row;
			}
			nodes.push(svg('line', { x1: lx, x2: lx + 14, y1: ly - 4, y2: ly - 4, stroke: color, 'stroke-width': 2 }));
			nodes.push(svg('text', { x: lx + 18, y: ly, 'font-size': px, fill: color, 'class': 'sqmkit-legend' }, [s.name]));
			lx += item;
		}, this);
		var h = ly + 6;
		return svg('svg', { viewBox: '0 0 %d %d'.format(w, h), width: '100%', 'class': 'sqmkit-chart', role: 'img', 'aria-label': title }, nodes);
	}
});
