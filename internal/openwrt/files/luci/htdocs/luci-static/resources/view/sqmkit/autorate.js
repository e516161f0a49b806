'use strict';
'require view';
'require rpc';
'require poll';
'require ui';
'require sqmkit.chart as chart';

/*
 * autorate as it runs: for each queue with option autorate '1', its
 * rates within the floor and ceiling, and the last minutes of rates and
 * added delay from the status file the daemon keeps.
 */

var callAutorate = rpc.declare({ object: 'sqmkit', method: 'autorate' });

return view.extend({
	load: function() {
		return callAutorate();
	},

	section: function(s) {
		var st = s.status;
		var box = E('div', { 'class': 'cbi-section sqmkit-autorate', 'data-section': s.section }, [
			E('h3', {}, _('Queue %s (%s)').format(s.section, s.interface))
		]);
		if (!st) {
			box.appendChild(E('p', {}, _('No status from its autorate yet: it starts with the sqmkit service (/etc/init.d/sqmkit start).')));
			return box;
		}
		box.appendChild(E('p', { 'class': 'sqmkit-rates' }, _('%s. Download %d kbit/s (%s, floor %d, ceiling %d), upload %d kbit/s (%s, floor %d, ceiling %d).').format(
			s.running ? _('Running') : _('Stopped (its status is %s old)').format(new Date(st.at).toLocaleTimeString()),
			st.Rate[0], st.State[0], st.Min[0], st.Max[0], st.Rate[1], st.State[1], st.Min[1], st.Max[1])));
		var h = st.history || [], t0 = h.length ? h[h.length - 1].t : 0;
		var x = function(p) { return (p.t - t0) / 60; };
		box.appendChild(chart.draw(_('Rates'), 'Mbit/s', [
			{ name: _('download'), points: h.map(function(p) { return [x(p), p.rate[0] / 1000]; }) },
			{ name: _('upload'), points: h.map(function(p) { return [x(p), p.rate[1] / 1000]; }) },
			{ name: _('download load'), points: h.map(function(p) { return [x(p), p.load[0] / 1000]; }), color: '#9ecae1' },
			{ name: _('upload load'), points: h.map(function(p) { return [x(p), p.load[1] / 1000]; }), color: '#fdd0a2' }
		], { xlabel: _('minutes before now') }));
		var paths = {};
		h.forEach(function(p) { Object.keys(p.added_ms || {}).forEach(function(k) { paths[k] = true; }); });
		box.appendChild(chart.draw(_('Added delay over the baseline'), 'ms', Object.keys(paths).sort().map(function(k) {
			return { name: k, points: h.filter(function(p) { return p.added_ms && k in p.added_ms; }).map(function(p) { return [x(p), p.added_ms[k]]; }) };
		}), { xlabel: _('minutes before now') }));
		return box;
	},

	fill: function(res) {
		var box = this.box;
		if (res && res.error) {
			ui.addNotification(null, E('p', {}, res.error), 'danger');
			return;
		}
		box.innerHTML = '';
		var sections = (res && res.sections) || [];
		if (!sections.length)
			box.appendChild(E('p', {}, _("No enabled queue has option autorate '1'.")));
		sections.forEach(function(s) { box.appendChild(this.section(s)); }, this);
	},

	render: function(res) {
		this.box = E('div', { 'id': 'sqmkit-autorate' });
		this.fill(res);
		poll.add(L.bind(function() { return callAutorate().then(L.bind(this.fill, this)); }, this), 5);
		return E('div', {}, [
			E('h2', {}, _('Autorate')),
			E('div', { 'class': 'cbi-map-descr' }, _('sqmkit autorate moves the shaper\'s rates between a floor and a ceiling as the delay the link adds rises and falls.')),
			this.box
		]);
	},

	handleSaveApply: null,
	handleSave: null,
	handleReset: null
});
