'use strict';
'require view';
'require rpc';
'require poll';
'require ui';
'require sqmkit.notify as notify';

/*
 * tune from the page: a search of minutes that runs on the router whether
 * or not the page stays open, its steps as they come, then the rates it
 * found beside the configured ones, with Write and Undo.
 */

var callState = rpc.declare({ object: 'sqmkit', method: 'tune_state' });
var callStatus = rpc.declare({ object: 'sqmkit', method: 'status' });
var callStart = rpc.declare({ object: 'sqmkit', method: 'tune_start', params: ['server', 'section', 'target', 'budget'] });
var callWrite = rpc.declare({ object: 'sqmkit', method: 'tune_write' });
var callUndo = rpc.declare({ object: 'sqmkit', method: 'tune_undo', params: ['section'] });

return view.extend({
	load: function() {
		return Promise.all([callState(), callStatus()]);
	},

	outcome: function(st) {
		var o = st.outcome;
		if (!o)
			return '';
		var row = function(name, f, c) {
			return E('tr', { 'class': 'tr' }, [E('td', { 'class': 'td' }, name), E('td', { 'class': 'td sqmkit-found' }, '%d kbit/s'.format(f)),
				E('td', { 'class': 'td' }, '%d kbit/s'.format(c))]);
		};
		return E('div', { 'class': 'cbi-section', 'id': 'sqmkit-outcome' }, [
			E('h3', {}, _('Found for %s').format(st.section)),
			o.error ? E('p', { 'style': 'color:#c00' }, _('The tune ended without rates to keep: %s').format(o.error)) :
				E('p', {}, _('Confirming test: grade %s%s; %d s of test time.').format(o.confirm_grade || '-',
					o.unconfirmed ? _(' (the last lowering was not confirmed again)') : '', o.spent_s)),
			E('table', { 'class': 'table' }, [
				E('tr', { 'class': 'tr table-titles' }, [_('Direction'), _('Found'), _('Configured now')].map(function(h) {
					return E('th', { 'class': 'th' }, h);
				})),
				row(_('download'), o.found.download_kbit, o.current.download_kbit),
				row(_('upload'), o.found.upload_kbit, o.current.upload_kbit)
			]),
			E('p', { 'class': 'sqmkit-why' }, o.why.filter(function(w) { return w; }).join(' · '))
		]);
	},

	fill: function(st) {
		var el = this.el;
		el.progress.textContent = st.progress.join('\n');
		el.running.textContent = st.running ? _('Tuning %s against %s since %s…').format(st.section, st.server, new Date(st.started).toLocaleTimeString()) : '';
		el.start.disabled = !!st.running;
		el.outcome.innerHTML = '';
		el.outcome.appendChild(E('div', {}, this.outcome(st)));
		el.write.style.display = st.outcome && st.outcome.writable ? '' : 'none';
		el.undo.style.display = st.undo && !st.running ? '' : 'none';
	},

	refresh: function() {
		return callState().then(L.bind(function(st) {
			if (!notify.failed(st))
				this.fill(st);
		}, this));
	},

	start: function() {
		var el = this.el;
		return callStart(el.server.value, el.section.value, el.target.value, +el.budget.value).then(L.bind(function(res) {
			if (!notify.failed(res))
				return this.refresh();
		}, this));
	},

	act: function(call, done) {
		return call().then(L.bind(function(res) {
			if (notify.failed(res))
				return;
			ui.addNotification(null, E('p', {}, done(res)), 'info');
			return this.refresh();
		}, this));
	},

	render: function(data) {
		var st = data[0], status = data[1];
		notify.failed(st);
		st = st && !st.error ? st : { progress: [] };
		var sections = ((status && status.queues) || []).map(function(q) { return q.section; });
		var el = this.el = {
			server: E('input', { 'id': 'sqmkit-server', 'class': 'cbi-input-text', 'placeholder': 'vps.example.net:8693', 'value': st.server || '' }),
			section: E('select', { 'id': 'sqmkit-section', 'class': 'cbi-input-select' }, sections.map(function(s) {
				return E('option', { 'value': s, 'selected': s == st.section ? '' : null }, s);
			})),
			target: E('select', { 'id': 'sqmkit-target', 'class': 'cbi-input-select' }, ['A+', 'A'].map(function(t) {
				return E('option', { 'value': t }, t);
			})),
			budget: E('input', { 'id': 'sqmkit-budget', 'class': 'cbi-input-text', 'type': 'number', 'min': 60, 'max': 3600, 'value': st.budget_s || 180 }),
			start: E('button', { 'id': 'sqmkit-tune-start', 'class': 'cbi-button cbi-button-action', 'click': L.bind(this.start, this) }, _('Start tune')),
			running: E('p', { 'id': 'sqmkit-tune-running' }),
			progress: E('pre', { 'id': 'sqmkit-tune-progress' }),
			outcome: E('div'),
			write: E('button', { 'id': 'sqmkit-tune-write', 'class': 'cbi-button cbi-button-save', 'click': L.bind(this.act, this, callWrite, function(r) {
				return _('Written: download %d, upload %d kbit/s (were %d/%d).').format(r.written.download_kbit, r.written.upload_kbit, r.old.download_kbit, r.old.upload_kbit);
			}) }, _('Write these rates')),
			undo: E('button', { 'id': 'sqmkit-tune-undo', 'class': 'cbi-button cbi-button-reset', 'click': L.bind(this.act, this, function() {
				return callUndo(el.section.value);
			}, function(r) {
				return _('Restored: download %d, upload %d kbit/s.').format(r.restored.download_kbit, r.restored.upload_kbit);
			}) }, _('Undo the last write'))
		};
		var nodes = E('div', {}, [
			E('h2', {}, _('Tune the rates')),
			E('div', { 'class': 'cbi-map-descr' }, _('Finds the highest download and upload rates that keep the grade, against a sqmkit serve past the bottleneck, and confirms them with a full test. It runs on the router: you may close this page. Nothing is written until you press Write.')),
			E('div', { 'class': 'cbi-section' }, [
				E('div', { 'class': 'cbi-value' }, [E('label', { 'class': 'cbi-value-title' }, _('Server')), el.server]),
				E('div', { 'class': 'cbi-value' }, [E('label', { 'class': 'cbi-value-title' }, _('Queue')), el.section]),
				E('div', { 'class': 'cbi-value' }, [E('label', { 'class': 'cbi-value-title' }, _('Grade to keep')), el.target]),
				E('div', { 'class': 'cbi-value' }, [E('label', { 'class': 'cbi-value-title' }, _('Test time (s)')), el.budget]),
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
