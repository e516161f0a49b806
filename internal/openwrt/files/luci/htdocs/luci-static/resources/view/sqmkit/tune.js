'use strict';
'require view';
'require rpc';
'require poll';
'require ui';
'require sqmkit.notify as notify';

/*
 * tune from the page: a search of minutes that runs on the router whether
 * or not the page stays open, its steps as they come, then the rates it
 * found beside the configured ones, with Write and Undo (each asked for
 * once more). The test-time bounds are the command's, from the plugin.
 */

var callState = rpc.declare({ object: 'sqmkit', method: 'tune_state' });
var callStatus = rpc.declare({ object: 'sqmkit', method: 'status' });
var callStart = rpc.declare({ object: 'sqmkit', method: 'tune_start', params: [ 'server', 'section', 'target', 'budget', 'token' ] });
var callWrite = rpc.declare({ object: 'sqmkit', method: 'tune_write' });
var callUndo = rpc.declare({ object: 'sqmkit', method: 'tune_undo', params: [ 'section' ] });

return view.extend({
	load: function() {
		return Promise.all([ notify.call(callState), notify.call(callStatus) ]);
	},

	outcome: function(st) {
		var o = st.outcome, t = notify.text;
		if (!o)
			return '';
		if (o.error)
			return E('div', { 'class': 'cbi-section', 'id': 'sqmkit-outcome' }, [
				E('h3', {}, [ t(_('The tune of %s ended without rates to keep').format(st.section)) ]),
				E('p', { 'class': 'sqmkit-tune-error', 'style': 'color:#c00' }, [ t(o.error) ]),
				E('p', {}, [ t(_('The configured rates (%d / %d kbit/s) stay as they were.').format(o.current.download_kbit, o.current.upload_kbit)) ])
			]);
		var cols = [ _('Direction'), _('Found'), _('Configured now') ];
		var row = function(name, f, c) {
			return E('tr', { 'class': 'tr' }, [ notify.cell(cols[0], t(name)), notify.cell(cols[1], t(_('%d kbit/s').format(f)), 'sqmkit-found'),
				notify.cell(cols[2], t(_('%d kbit/s').format(c))) ]);
		};
		return E('div', { 'class': 'cbi-section', 'id': 'sqmkit-outcome' }, [
			E('h3', {}, [ t(_('Found for %s').format(st.section)) ]),
			E('p', {}, [ t(_('Confirming test: grade %s; %d s of test time.').format(o.confirm_grade || '-', o.spent_s) +
				(o.unconfirmed ? ' ' + _('(the last lowering was not confirmed again)') : '')) ]),
			E('table', { 'class': 'table' }, [
				notify.head(cols),
				row(_('download'), o.found.download_kbit, o.current.download_kbit),
				row(_('upload'), o.found.upload_kbit, o.current.upload_kbit)
			]),
			E('p', { 'class': 'sqmkit-why' }, [ t(o.why.filter(function(w) { return w; }).join(' · ')) ])
		]);
	},

	fill: function(st) {
		var el = this.el, ro = !notify.writable();
		this.state = st;
		notify.warn(st.recovered);
		el.progress.textContent = st.progress.join('\n');
		el.running.textContent = st.running ? _('Tuning %s against %s since %s…').format(st.section, st.server || st.default_server, new Date(st.started).toLocaleTimeString()) : '';
		el.start.disabled = !!st.running || ro;
		notify.redraw(el.outcome, JSON.stringify([ st.section, st.outcome ]), L.bind(function() { return [ E('div', {}, [ this.outcome(st) ]) ]; }, this));
		el.write.style.display = st.outcome && st.outcome.writable && !ro ? '' : 'none';
		el.undo.style.display = st.undo && !st.running && !ro ? '' : 'none';
		if (st.limits) {
			el.budget.min = st.limits.budget_min_s;
			el.budget.max = st.limits.budget_max_s;
			el.limits.textContent = _('%d to %d s').format(st.limits.budget_min_s, st.limits.budget_max_s);
		}
	},

	refresh: function() {
		return notify.call(callState).then(L.bind(function(st) {
			if (st != null && !notify.failed(st))
				this.fill(st);
		}, this));
	},

	start: function() {
		var el = this.el;
		return notify.call(callStart, el.server.value, el.section.value, el.target.value, +el.budget.value, el.token.value).then(L.bind(function(res) {
			if (res != null && !notify.failed(res))
				return this.refresh();
		}, this));
	},

	/* act(question, label, call, done): asks, then calls and says what it did */
	act: function(question, label, call, done) {
		return notify.confirm(_('Change the rates?'), question(), label).then(L.bind(function(yes) {
			if (!yes)
				return;
			return notify.call(call).then(L.bind(function(res) {
				if (res == null || notify.failed(res))
					return;
				ui.addNotification(null, E('p', {}, [ notify.text(done(res)) ]), 'info');
				return this.refresh();
			}, this));
		}, this));
	},

	render: function(data) {
		var st = data[0], status = data[1], ro = !notify.writable();
		if (st != null)
			notify.failed(st);
		st = st && !st.error ? st : { progress: [] };
		var lim = st.limits || { budget_min_s: 140, budget_max_s: 3600, budget_default_s: 180 };
		var sections = ((status && status.queues) || []).map(function(q) { return q.section; });
		var found = L.bind(function() { return (this.state && this.state.outcome) || { found: {}, current: {} }; }, this);
		var el = this.el = {
			server: E('input', { 'id': 'sqmkit-server', 'class': 'cbi-input-text', 'placeholder': st.default_server || '', 'value': st.server || '', 'disabled': ro || null }),
			serverHint: E('span', { 'class': 'cbi-value-description', 'id': 'sqmkit-server-default' }, [ notify.text(_('Empty: %s (the queue\'s option test_server, else Apple\'s public responsiveness server). Your own sqmkit serve (HOST:PORT) adds the one-way split.').format(st.default_server || '')) ]),
			token: E('input', { 'id': 'sqmkit-token', 'type': 'password', 'class': 'cbi-input-password', 'disabled': ro || null }),
			section: E('select', { 'id': 'sqmkit-section', 'class': 'cbi-input-select', 'disabled': ro || null }, sections.map(function(s) {
				return E('option', { 'value': s, 'selected': s == st.section ? '' : null }, [ notify.text(s) ]);
			})),
			target: E('select', { 'id': 'sqmkit-target', 'class': 'cbi-input-select', 'disabled': ro || null }, [ 'A+', 'A' ].map(function(g) {
				return E('option', { 'value': g }, [ g ]);
			})),
			budget: E('input', { 'id': 'sqmkit-budget', 'class': 'cbi-input-text', 'type': 'number', 'min': lim.budget_min_s, 'max': lim.budget_max_s,
				'value': st.budget_s || lim.budget_default_s, 'disabled': ro || null }),
			limits: E('span', { 'class': 'cbi-value-description', 'id': 'sqmkit-budget-limits' }),
			start: E('button', { 'id': 'sqmkit-tune-start', 'class': 'cbi-button cbi-button-action', 'click': L.bind(this.start, this), 'disabled': ro || null }, [ _('Start tune') ]),
			running: E('p', { 'id': 'sqmkit-tune-running' }),
			progress: E('pre', { 'id': 'sqmkit-tune-progress' }),
			outcome: E('div'),
			write: E('button', { 'id': 'sqmkit-tune-write', 'class': 'cbi-button cbi-button-save', 'click': L.bind(this.act, this, function() {
				var o = found();
				return _('Write download %d and upload %d kbit/s into /etc/config/sqm and the running shaper (now %d / %d)?').format(
					o.found.download_kbit, o.found.upload_kbit, o.current.download_kbit, o.current.upload_kbit);
			}, _('Write'), callWrite, function(r) {
				return _('Written: download %d, upload %d kbit/s (were %d/%d).').format(r.written.download_kbit, r.written.upload_kbit, r.old.download_kbit, r.old.upload_kbit);
			}) }, [ _('Write these rates') ]),
			undo: E('button', { 'id': 'sqmkit-tune-undo', 'class': 'cbi-button cbi-button-reset', 'click': L.bind(this.act, this, function() {
				return _('Put back the rates the last write replaced, in /etc/config/sqm and the running shaper?');
			}, _('Undo'), function() {
				return callUndo(el.section.value);
			}, function(r) {
				return _('Restored: download %d, upload %d kbit/s.').format(r.restored.download_kbit, r.restored.upload_kbit);
			}) }, [ _('Undo the last write') ])
		};
		var value = function(label, input, extra) {
			return E('div', { 'class': 'cbi-value' }, [ E('label', { 'class': 'cbi-value-title' }, [ label ]),
				E('div', { 'class': 'cbi-value-field' }, [ input ].concat(extra || [])) ]);
		};
		var nodes = E('div', {}, [
			E('h2', {}, [ _('Tune the rates') ]),
			E('div', { 'class': 'cbi-map-descr' }, [ _('Finds the highest download and upload rates that keep the grade, against a server past the bottleneck (a public responsiveness server unless you name one), and confirms them with a full test. It runs on the router: you may close this page. Nothing is written until you press Write.') ]),
			E('div', { 'class': 'cbi-section' }, [
				value(_('Server'), el.server, [ el.serverHint ]), value(_('Token'), el.token), value(_('Queue'), el.section),
				value(_('Grade to keep'), el.target), value(_('Test time (s)'), el.budget, [ ' ', el.limits ]),
				el.start, el.running, el.progress
			]),
			el.outcome, el.write, ' ', el.undo
		]);
		this.fill(st);
		poll.add(L.bind(this.refresh, this), 2);
		return nodes;
	},

	handleSaveApply: null,
	handleSave: null,
	handleReset: null
});
