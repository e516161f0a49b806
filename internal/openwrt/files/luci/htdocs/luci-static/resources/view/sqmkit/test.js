'use strict';
'require view';
'require rpc';
'require poll';
'require sqmkit.notify as notify';
'require sqmkit.chart as chart';

/*
 * The bufferbloat test from the router: the grade, the added latency of
 * each phase, goodput, notes, and the chart of the chosen result, drawn
 * here from its samples. The last results are kept.
 */

var callState = rpc.declare({ object: 'sqmkit', method: 'test_state' });
var callStart = rpc.declare({ object: 'sqmkit', method: 'test_start', params: [ 'server', 'token' ] });
var callResult = rpc.declare({ object: 'sqmkit', method: 'test_result', params: [ 'id' ] });

return view.extend({
	load: function() {
		return notify.call(callState);
	},

	resultTable: function(r) {
		var t = notify.text;
		var cols = [ _('Phase'), _('Added median / p95'), _('Goodput down / up'), _('Grade') ];
		return E('div', { 'class': 'sqmkit-result cbi-section', 'data-id': r.id }, [
			E('h4', {}, [ t(_('%s against %s').format(r.started, r.server)) ]),
			E('p', { 'class': 'sqmkit-grade' }, [ _('Grade'), ' ', E('strong', { 'class': 'sqmkit-grade-letter' }, [ t(r.grade || '-') ]) ]),
			r.incomplete ? E('p', { 'class': 'sqmkit-incomplete', 'style': 'color:#b60' }, [ t(_('Incomplete: %s').format(r.incomplete)) ]) : '',
			(r.notes || []).length ? E('ul', { 'class': 'sqmkit-notes' }, r.notes.map(function(n) { return E('li', {}, [ t(n) ]); })) : '',
			E('table', { 'class': 'table' }, [ notify.head(cols) ].concat(r.phases.map(function(p) {
				return E('tr', { 'class': 'tr' }, [
					notify.cell(cols[0], t(p.name)),
					notify.cell(cols[1], t(_('+%.1f / +%.1f ms').format(p.added_median_ms, p.added_p95_ms))),
					notify.cell(cols[2], t(_('%.1f / %.1f Mbit/s').format(p.download_mbps, p.upload_mbps))),
					notify.cell(cols[3], t(p.grade || ''))
				]);
			}))),
			E('button', { 'class': 'cbi-button', 'click': L.bind(this.showChart, this, r.id) }, [ _('Chart') ])
		]);
	},

	showChart: function(id) {
		var box = this.el.chart;
		return notify.call(callResult, id).then(function(res) {
			if (res == null || notify.failed(res))
				return;
			var rtt = res.rtt_ms || [], down = res.download_mbps || [], up = res.upload_mbps || [];
			var bands = (res.phases || []).filter(function(p) { return p.end_s > p.start_s; })
				.map(function(p) { return { name: p.name, from: p.start_s, to: p.end_s }; });
			var sorted = rtt.map(function(p) { return p[1]; }).sort(function(a, b) { return a - b; });
			var clip = sorted.length ? sorted[Math.floor(0.99 * (sorted.length - 1))] * 1.2 : 0;
			box.textContent = '';
			box.setAttribute('data-id', id);
			if (!rtt.length && !down.length && !up.length) {
				box.appendChild(E('p', { 'class': 'sqmkit-no-chart' }, [ notify.text(_('No chart: this test kept no samples (%s).').format(res.incomplete || _('it ended before its first'))) ]));
				return;
			}
			box.appendChild(chart.draw(_('Latency (probe round trip) — %s, grade %s').format(res.server, res.grade || '-'), _('ms'),
				[ { name: _('round trip'), points: rtt } ], { bands: bands, xlabel: _('seconds'), clip: clip }));
			box.appendChild(chart.draw(_('Goodput'), _('Mbit/s'),
				[ { name: _('download'), points: down }, { name: _('upload'), points: up } ],
				{ bands: bands, xlabel: _('seconds') }));
		});
	},

	/* fill shows a state: the last progress line while a test runs, the
	 * kept results */
	fill: function(st) {
		var el = this.el;
		var last = st.log.length ? st.log[st.log.length - 1] : '';
		el.running.textContent = st.running ? _('A test runs against %s: %s').format(st.server || st.default_server, last || '…') : '';
		el.start.disabled = !!st.running || !notify.writable();
		var ids = st.results.map(function(r) { return r.id; }).join(',');
		if (!notify.redraw(el.results, ids, L.bind(function() { return st.results.map(this.resultTable, this); }, this)))
			return;
		if (st.results.length && !st.running)
			this.showChart(st.results[0].id);
	},

	refresh: function() {
		return notify.call(callState).then(L.bind(function(st) {
			if (st != null && !notify.failed(st))
				this.fill(st);
		}, this));
	},

	start: function() {
		return notify.call(callStart, this.el.server.value, this.el.token.value).then(L.bind(function(res) {
			if (res != null && !notify.failed(res))
				return this.refresh();
		}, this));
	},

	render: function(st) {
		if (st != null)
			notify.failed(st);
		st = st && !st.error ? st : { log: [], results: [] };
		var ro = !notify.writable();
		var el = this.el = {
			server: E('input', { 'id': 'sqmkit-server', 'class': 'cbi-input-text', 'placeholder': st.default_server || '', 'value': st.server || '', 'disabled': ro || null }),
			serverHint: E('span', { 'class': 'cbi-value-description', 'id': 'sqmkit-server-default' }, [ notify.text(_('Empty: %s (the queue\'s option test_server, else Apple\'s public responsiveness server). Your own sqmkit serve (HOST:PORT) adds the one-way split.').format(st.default_server || '')) ]),
			token: E('input', { 'id': 'sqmkit-token', 'type': 'password', 'class': 'cbi-input-password', 'disabled': ro || null }),
			start: E('button', { 'id': 'sqmkit-test-start', 'class': 'cbi-button cbi-button-action', 'click': L.bind(this.start, this), 'disabled': ro || null }, [ _('Start test') ]),
			running: E('p', { 'id': 'sqmkit-test-running' }),
			chart: E('div', { 'id': 'sqmkit-chart' }),
			results: E('div', { 'id': 'sqmkit-results' })
		};
		var nodes = E('div', {}, [
			E('h2', {}, [ _('Bufferbloat test') ]),
			E('div', { 'class': 'cbi-map-descr' }, [ _('Loads the link both ways from the router against a server past the bottleneck (a public responsiveness server unless you name one) and grades the latency the load adds.') ]),
			E('div', { 'class': 'cbi-section' }, [
				E('div', { 'class': 'cbi-value' }, [ E('label', { 'class': 'cbi-value-title', 'for': 'sqmkit-server' }, [ _('Server') ]),
					E('div', { 'class': 'cbi-value-field' }, [ el.server, el.serverHint ]) ]),
				E('div', { 'class': 'cbi-value' }, [ E('label', { 'class': 'cbi-value-title', 'for': 'sqmkit-token' }, [ _('Token') ]), el.token ]),
				el.start, el.running
			]),
			el.chart,
			E('div', { 'class': 'cbi-section' }, [ E('h3', {}, [ _('Last results') ]), el.results ])
		]);
		this.fill(st);
		poll.add(L.bind(this.refresh, this), 2);
		return nodes;
	},

	handleSaveApply: null,
	handleSave: null,
	handleReset: null
});
