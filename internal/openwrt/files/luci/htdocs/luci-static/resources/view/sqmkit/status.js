'use strict';
'require view';
'require rpc';
'require poll';
'require sqmkit.notify as notify';
'require sqmkit.chart as chart';

/*
 * Is the shaper really working? Each queue as `sqmkit status` sees it,
 * its counters every few seconds, the doctor's findings, worst first, and
 * what the router keeps across reboots: its grades and rates over time,
 * the rates tune wrote, and the watch's findings in words.
 */

var callStatus = rpc.declare({ object: 'sqmkit', method: 'status' });
var callCounters = rpc.declare({ object: 'sqmkit', method: 'counters' });
var callDoctor = rpc.declare({ object: 'sqmkit', method: 'doctor' });

function rate(bps) {
	return bps >= 1e6 ? _('%.1f Mbit/s').format(bps / 1e6) : _('%.0f kbit/s').format(bps / 1e3);
}

return view.extend({
	load: function() {
		return Promise.all([ notify.call(callStatus), notify.call(callCounters), notify.call(callDoctor) ]);
	},

	queueSection: function(q) {
		var ok = q.shaped, t = notify.text;
		// a section refused for its own mistake: its error, not a plan it has none of
		if (q.error && !q.interface)
			return E('div', { 'class': 'cbi-section sqmkit-refused', 'data-section': q.section }, [
				E('h3', {}, [ t(_('Queue %s').format(q.section)) ]),
				E('p', { 'class': 'sqmkit-verdict' }, [ E('strong', { 'style': 'color:#c00' }, [ _('Refused') ]), t(' — ' + q.error) ])
			]);
		var head = E('p', { 'class': 'sqmkit-verdict' }, [
			E('strong', { 'style': 'color:' + (ok ? 'green' : '#c00') }, [ ok ? _('Shaped as planned') : _('Not as planned') ]),
			t(' — ' + _('%s on %s, backend %s, download %d / upload %d kbit/s').format(q.section, q.interface, q.backend, q.download_kbit, q.upload_kbit) +
				(q.use_mq ? ', ' + _('multi-queue cake asked for') : ''))
		]);
		var cols = [ _('Direction'), _('Device'), _('Root qdisc'), _('Rate'), _('Throughput · drops · ECN marks · backlog') ];
		var rows = q.directions.map(function(d) {
			return E('tr', { 'class': 'tr', 'data-device': d.device }, [
				notify.cell(cols[0], t(d.direction)),
				notify.cell(cols[1], t(d.device)),
				notify.cell(cols[2], t(d.root || _('none'))),
				notify.cell(cols[3], t(_('%d kbit/s').format(d.rate_kbit))),
				notify.cell(cols[4], t('…'), 'sqmkit-live')
			]);
		});
		var diffs = (q.diffs || []).concat(q.error ? [ q.error ] : []);
		return E('div', { 'class': 'cbi-section', 'data-section': q.section }, [
			E('h3', {}, [ t(_('Queue %s').format(q.section)) ]),
			head,
			diffs.length ? E('ul', { 'class': 'sqmkit-diffs' }, diffs.map(function(d) { return E('li', {}, [ t(d) ]); })) : '',
			(q.warnings || []).length ? E('ul', { 'class': 'sqmkit-warnings' }, q.warnings.map(function(w) { return E('li', {}, [ t(w) ]); })) : '',
			E('table', { 'class': 'table' }, [ notify.head(cols) ].concat(rows))
		]);
	},

	historySection: function(section, h) {
		var t = notify.text;
		if (!h)
			return '';
		var nodes = [ E('h4', {}, [ _('Since the rates were set') ]) ];
		if (h.findings.length)
			nodes.push(E('ul', { 'class': 'sqmkit-watch-findings' }, h.findings.map(function(f) {
				return E('li', { 'class': 'sqmkit-watch-finding', 'data-id': f.id }, [ E('strong', {}, [ t(f.evidence) ]), E('br'), t(_('Fix: %s').format(f.fix)) ]);
			})));
		else
			nodes.push(E('p', { 'class': 'sqmkit-watch-ok' }, [ h.watching ? _('The watch finds the line as the rates were set for.') : _('No finding. The watch runs while the queue is shaped and autorate is off.') ]));
		if (h.tuned)
			nodes.push(E('p', { 'class': 'sqmkit-tuned' }, [ t(_('Tune wrote download %d and upload %d kbit/s on %s, on a line of %d / %d kbit/s.').format(
				h.tuned.down_kbit, h.tuned.up_kbit, new Date(h.tuned.at).toLocaleDateString(), h.tuned.line_down_kbit, h.tuned.line_up_kbit)) ]));
		if (h.ceiling_mbps)
			nodes.push(E('p', { 'class': 'sqmkit-ceiling' }, [ t(_('This router shapes up to about %.0f Mbit/s (its last CPU measurement).').format(h.ceiling_mbps)) ]));
		if (h.grades.length) {
			var cols = [ _('When'), _('By'), _('Grade'), _('Rates down / up'), _('Line down / up') ];
			nodes.push(E('table', { 'class': 'table sqmkit-grades' }, [ notify.head(cols) ].concat(h.grades.slice().reverse().map(function(g) {
				return E('tr', { 'class': 'tr' }, [
					notify.cell(cols[0], t(new Date(g.at).toLocaleString())), notify.cell(cols[1], t(g.by)),
					notify.cell(cols[2], E('strong', {}, [ t(g.grade) ])),
					notify.cell(cols[3], t(g.down_kbit ? _('%d / %d kbit/s').format(g.down_kbit, g.up_kbit) : '-')),
					notify.cell(cols[4], t(g.line_down_kbit ? _('%d / %d kbit/s').format(g.line_down_kbit, g.line_up_kbit) : '-'))
				]);
			}))));
			var now = Date.now(), days = function(g) { return -(now - new Date(g.at).getTime()) / 864e5; };
			var rated = h.grades.filter(function(g) { return g.down_kbit; }), lined = h.grades.filter(function(g) { return g.line_down_kbit; });
			nodes.push(chart.draw(_('Rates over time'), _('Mbit/s'), [
				{ name: _('download rate'), points: rated.map(function(g) { return [ days(g), g.down_kbit / 1000 ]; }) },
				{ name: _('upload rate'), points: rated.map(function(g) { return [ days(g), g.up_kbit / 1000 ]; }) },
				{ name: _('download line'), points: lined.map(function(g) { return [ days(g), g.line_down_kbit / 1000 ]; }), color: '#9ecae1' },
				{ name: _('upload line'), points: lined.map(function(g) { return [ days(g), g.line_up_kbit / 1000 ]; }), color: '#fdd0a2' }
			], { xlabel: _('days before now') }));
		}
		return E('div', { 'class': 'cbi-section sqmkit-history', 'data-section': section }, nodes);
	},

	doctorSection: function(d, status) {
		var t = notify.text;
		// the config's error is the banner's already: said once
		if (d && d.error && status && d.error === status.error)
			return E('p', { 'id': 'sqmkit-doctor' }, [ _('The doctor needs the queues; see the message above.') ]);
		if (!d || d.error)
			return E('p', { 'id': 'sqmkit-doctor' }, [ t(d && d.error ? d.error : _('The doctor could not run.')) ]);
		var sev = { fail: '#c00', warn: '#b60', ok: 'green' };
		var cols = [ _('Severity'), _('Finding'), _('Evidence'), _('Fix') ];
		return E('div', { 'class': 'cbi-section', 'id': 'sqmkit-doctor' }, [
			E('h3', {}, [ _('Doctor: is the shaper on the path?') ]),
			E('p', {}, [ t(_('Status: %s.').format(d.status) + (d.note ? ' ' + d.note : '')) ]),
			E('table', { 'class': 'table' }, [ notify.head(cols) ].concat((d.findings || []).map(function(f) {
				return E('tr', { 'class': 'tr sqmkit-finding', 'data-id': f.id, 'data-severity': f.severity }, [
					notify.cell(cols[0], E('span', { 'style': 'color:' + (sev[f.severity] || 'inherit') }, [ t(f.severity) ])),
					notify.cell(cols[1], [ E('strong', {}, [ t(f.id) ]), E('br'), t(f.subject) ]),
					notify.cell(cols[2], t((f.evidence || []).join('; '))),
					notify.cell(cols[3], t(f.fix || ''))
				]);
			})))
		]);
	},

	/* live fills each direction's counter cell from two samples' deltas */
	live: function(prev, cur) {
		if (!cur || cur.error || !prev || !prev.devices)
			return;
		var dt = (cur.at_ms - prev.at_ms) / 1000;
		if (dt <= 0)
			return;
		Object.keys(cur.devices).forEach(function(dev) {
			var c = cur.devices[dev], p = prev.devices[dev];
			var row = Array.prototype.find.call(document.querySelectorAll('tr[data-device]'), function(tr) { return tr.getAttribute('data-device') === dev; });
			var cell = row && row.querySelector('.sqmkit-live');
			if (!cell || !p || c.bytes < p.bytes)
				return;
			cell.textContent = _('%s · %.1f drops/s · %.1f marks/s · %d B / %d pkt').format(rate((c.bytes - p.bytes) * 8 / dt),
				(c.drops - p.drops) / dt, (c.ecn_marks - p.ecn_marks) / dt, c.backlog_bytes, c.backlog_packets);
		});
	},

	render: function(data) {
		var status = data[0], counters = data[1], doctor = data[2];
		var body;
		if (status && !status.error)
			notify.warn(status.recovered);
		if (status == null || notify.failed(status))
			body = E('p', { 'class': 'sqmkit-unknown' }, [ _('The queues could not be read; see the message above.') ]);
		else if (!status.queues.length)
			body = E('p', { 'class': 'sqmkit-none' }, [ _('No enabled queue in /etc/config/sqm: enable one and set its rates on the SQM QoS page.') ]);
		else
			body = E('div', {}, status.queues.map(function(q) {
				return E('div', {}, [ this.queueSection(q), this.historySection(q.section, (status.history || {})[q.section]) ]);
			}, this));
		var nodes = E('div', {}, [
			E('h2', {}, [ _('SQM proof (sqmkit)') ]),
			E('div', { 'class': 'cbi-map-descr' }, [ _('What the kernel holds for each enabled queue, next to the plan; live counters every 5 s; and the doctor, which checks from the counters that traffic really passes the shaper.') ]),
			body,
			this.doctorSection(doctor, status)
		]);
		var prev = counters;
		poll.add(L.bind(function() {
			return notify.call(callCounters).then(L.bind(function(cur) {
				if (cur == null || notify.failed(cur))
					return;
				this.live(prev, cur);
				prev = cur;
			}, this));
		}, this), 5);
		return nodes;
	},

	handleSaveApply: null,
	handleSave: null,
	handleReset: null
});
