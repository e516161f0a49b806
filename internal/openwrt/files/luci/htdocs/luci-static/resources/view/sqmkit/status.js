'use strict';
'require view';
'require rpc';
'require poll';
'require sqmkit.notify as notify';

/*
 * Is the shaper really working? Each queue as `sqmkit status` sees it,
 * its counters every few seconds, and the doctor's findings, worst first.
 */

var callStatus = rpc.declare({ object: 'sqmkit', method: 'status' });
var callCounters = rpc.declare({ object: 'sqmkit', method: 'counters' });
var callDoctor = rpc.declare({ object: 'sqmkit', method: 'doctor' });

function rate(bps) {
	return bps >= 1e6 ? '%.1f Mbit/s'.format(bps / 1e6) : '%.0f kbit/s'.format(bps / 1e3);
}

return view.extend({
	load: function() {
		return Promise.all([callStatus(), callCounters(), callDoctor()]);
	},

	queueSection: function(q) {
		var ok = q.shaped;
		var head = E('p', { 'class': 'sqmkit-verdict' }, [
			E('strong', { 'style': 'color:' + (ok ? 'green' : '#c00') }, ok ? _('Shaped as planned') : _('Not as planned')),
			' — %s on %s, backend %s, download %d / upload %d kbit/s%s'.format(q.section, q.interface, q.backend,
				q.download_kbit, q.upload_kbit, q.use_mq ? ', multi-queue cake asked for' : '')
		]);
		var rows = q.directions.map(function(d) {
			return E('tr', { 'class': 'tr', 'data-device': d.device }, [
				E('td', { 'class': 'td' }, d.direction),
				E('td', { 'class': 'td' }, d.device),
				E('td', { 'class': 'td' }, d.root || _('none')),
				E('td', { 'class': 'td' }, '%d kbit/s'.format(d.rate_kbit)),
				E('td', { 'class': 'td sqmkit-live' }, '…')
			]);
		});
		var diffs = (q.diffs || []).concat(q.error ? [q.error] : []);
		return E('div', { 'class': 'cbi-section', 'data-section': q.section }, [
			E('h3', {}, _('Queue %s').format(q.section)),
			head,
			diffs.length ? E('ul', { 'class': 'sqmkit-diffs' }, diffs.map(function(d) { return E('li', {}, d); })) : '',
			E('table', { 'class': 'table' }, [
				E('tr', { 'class': 'tr table-titles' }, [_('Direction'), _('Device'), _('Root qdisc'), _('Rate'),
					_('Throughput · drops · ECN marks · backlog')].map(function(h) { return E('th', { 'class': 'th' }, h); }))
			].concat(rows))
		]);
	},

	doctorSection: function(d) {
		if (!d || d.error)
			return E('p', {}, d && d.error ? d.error : _('The doctor could not run.'));
		var sev = { fail: '#c00', warn: '#b60', ok: 'green' };
		return E('div', { 'class': 'cbi-section', 'id': 'sqmkit-doctor' }, [
			E('h3', {}, _('Doctor: is the shaper on the path?')),
			E('p', {}, _('Status: %s. %s').format(d.status, d.note || '')),
			E('table', { 'class': 'table' }, [
				E('tr', { 'class': 'tr table-titles' }, [_('Severity'), _('Finding'), _('Evidence'), _('Fix')].map(function(h) {
					return E('th', { 'class': 'th' }, h);
				}))
			].concat((d.findings || []).map(function(f) {
				return E('tr', { 'class': 'tr sqmkit-finding', 'data-id': f.id, 'data-severity': f.severity }, [
					E('td', { 'class': 'td', 'style': 'color:' + sev[f.severity] }, f.severity),
					E('td', { 'class': 'td' }, [E('strong', {}, f.id), E('br'), f.subject]),
					E('td', { 'class': 'td' }, (f.evidence || []).join('; ')),
					E('td', { 'class': 'td' }, f.fix || '')
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
			var cell = document.querySelector('tr[data-device="%s"] .sqmkit-live'.format(dev));
			if (!cell || !p || c.bytes < p.bytes)
				return;
			cell.textContent = '%s · %.1f drops/s · %.1f marks/s · %d B / %d pkt'.format(rate((c.bytes - p.bytes) * 8 / dt),
				(c.drops - p.drops) / dt, (c.ecn_marks - p.ecn_marks) / dt, c.backlog_bytes, c.backlog_packets);
		});
	},

	render: function(data) {
		var status = data[0], counters = data[1], doctor = data[2];
		notify.failed(status);
		var queues = (status && status.queues) || [];
		var nodes = E('div', {}, [
			E('h2', {}, _('SQM proof (sqmkit)')),
			E('div', { 'class': 'cbi-map-descr' }, _('What the kernel holds for each enabled queue, next to the plan; live counters every 5 s; and the doctor, which checks from the counters that traffic really passes the shaper.')),
			queues.length ? E('div', {}, queues.map(this.queueSection, this)) : E('p', {}, _('No enabled queue in /etc/config/sqm.')),
			this.doctorSection(doctor)
		]);
		var prev = counters;
		poll.add(L.bind(function() {
			return callCounters().then(L.bind(function(cur) {
				this.live(prev, cur);
				if (cur && !cur.error)
					prev = cur;
			}, this));
		}, this), 5);
		return nodes;
	},

	handleSaveApply: null,
	handleSave: null,
	handleReset: null
});
