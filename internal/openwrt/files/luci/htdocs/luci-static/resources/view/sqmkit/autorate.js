'use strict';
'require view';
'require rpc';
'require poll';
'require form';
'require uci';
'require sqmkit.notify as notify';
'require sqmkit.chart as chart';

/*
 * autorate: switched on and bounded per queue here (options autorate and
 * autorate_* of /etc/config/sqm, saved and applied as LuCI saves any
 * config: procd's trigger then reloads sqmkit's service, which starts or
 * ends the queue's autorate), and, as it runs, its rates within the floor
 * and ceiling and the last minutes of rates and added delay from the
 * status file the daemon keeps.
 */

var callAutorate = rpc.declare({ object: 'sqmkit', method: 'autorate' });

return view.extend({
	load: function() {
		// a config that does not parse is the plugin's banner; the settings
		// form, which needs it, is left out instead of failing the page
		return Promise.all([ notify.call(callAutorate), uci.load('sqm').catch(function() { return null; }) ]);
	},

	section: function(s) {
		var st = s.status, t = notify.text;
		var box = E('div', { 'class': 'cbi-section sqmkit-autorate', 'data-section': s.section }, [
			E('h3', {}, [ t(_('Queue %s (%s)').format(s.section, s.interface)) ])
		]);
		if (!st) {
			box.appendChild(E('p', { 'class': 'sqmkit-rates' }, [ _('No status from its autorate yet: it starts with the sqmkit service once autorate is on and applied.') ]));
			return box;
		}
		box.appendChild(E('p', { 'class': 'sqmkit-rates' }, [ t(_('%s. Download %d kbit/s (%s, floor %d, ceiling %d), upload %d kbit/s (%s, floor %d, ceiling %d).').format(
			s.running ? _('Running') : _('Stopped (its status is from %s)').format(new Date(st.at).toLocaleTimeString()),
			st.Rate[0], st.State[0], st.Min[0], st.Max[0], st.Rate[1], st.State[1], st.Min[1], st.Max[1])) ]));
		var h = st.history || [], t0 = h.length ? h[h.length - 1].t : 0;
		var x = function(p) { return (p.t - t0) / 60; };
		box.appendChild(chart.draw(_('Rates'), _('Mbit/s'), [
			{ name: _('download'), points: h.map(function(p) { return [ x(p), p.rate[0] / 1000 ]; }) },
			{ name: _('upload'), points: h.map(function(p) { return [ x(p), p.rate[1] / 1000 ]; }) },
			{ name: _('download load'), points: h.map(function(p) { return [ x(p), p.load[0] / 1000 ]; }), color: '#9ecae1' },
			{ name: _('upload load'), points: h.map(function(p) { return [ x(p), p.load[1] / 1000 ]; }), color: '#fdd0a2' }
		], { xlabel: _('minutes before now') }));
		var paths = {};
		h.forEach(function(p) { Object.keys(p.added_ms || {}).forEach(function(k) { paths[k] = true; }); });
		box.appendChild(chart.draw(_('Added delay over the baseline'), _('ms'), Object.keys(paths).sort().map(function(k) {
			return { name: k, points: h.filter(function(p) { return p.added_ms && k in p.added_ms; }).map(function(p) { return [ x(p), p.added_ms[k] ]; }) };
		}), { xlabel: _('minutes before now') }));
		return box;
	},

	fill: function(res) {
		var box = this.box;
		if (res == null || notify.failed(res))
			return;
		box.textContent = '';
		if (!res.sections.length)
			box.appendChild(E('p', { 'class': 'sqmkit-none' }, [ _('No enabled queue has autorate on.') ]));
		res.sections.forEach(function(s) { box.appendChild(this.section(s)); }, this);
	},

	/* settings: autorate on or off and its bounds, per enabled queue */
	settings: function() {
		var m = new form.Map('sqm', null, _('Switch autorate on for a queue whose capacity moves (LTE, Starlink, a busy cable segment), then Save & Apply. Empty bounds are a fifth and twice the queue\'s rates.'));
		var s = m.section(form.TypedSection, 'queue', _('Settings'));
		s.anonymous = false;
		s.filter = function(id) { return uci.get('sqm', id, 'enabled') == '1'; };
		var o = s.option(form.Flag, 'autorate', _('Autorate'), _('Move the rates between the floor and the ceiling as the delay the link adds rises and falls.'));
		o.rmempty = false;
		[ [ 'autorate_min_download', _('Download floor (kbit/s)') ], [ 'autorate_max_download', _('Download ceiling (kbit/s)') ],
		  [ 'autorate_min_upload', _('Upload floor (kbit/s)') ], [ 'autorate_max_upload', _('Upload ceiling (kbit/s)') ] ].forEach(function(b) {
			o = s.option(form.Value, b[0], b[1]);
			o.datatype = 'and(uinteger,max(10000000))';
			o.depends('autorate', '1');
		});
		o = s.option(form.Value, 'autorate_server', _('Server'), _('A sqmkit serve past the bottleneck, HOST or HOST:PORT, for one-way delays; or leave it empty and name reflectors.'));
		o.datatype = 'or(host,hostport)';
		o.depends('autorate', '1');
		o = s.option(form.Value, 'autorate_reflectors', _('Reflectors'), _('Hosts that answer ICMP echo, separated by spaces.'));
		o.depends('autorate', '1');
		return m.render();
	},

	render: function(data) {
		var res = data[0];
		this.box = E('div', { 'id': 'sqmkit-autorate' });
		this.fill(res);
		poll.add(L.bind(function() { return notify.call(callAutorate).then(L.bind(this.fill, this)); }, this), 5);
		var settings = res && !res.error ? this.settings() :
			Promise.resolve(E('p', { 'class': 'sqmkit-unavailable' }, [ _('The settings return once /etc/config/sqm reads again; see the message above.') ]));
		return settings.then(L.bind(function(form) {
			return E('div', {}, [
				E('h2', {}, [ _('Autorate') ]),
				E('div', { 'class': 'cbi-map-descr' }, [ _('sqmkit autorate moves the shaper\'s rates between a floor and a ceiling as the delay the link adds rises and falls.') ]),
				form,
				this.box
			]);
		}, this));
	}
});
