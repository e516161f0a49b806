'use strict';
'require baseclass';
'require ui';

/*
 * What every sqmkit page does with the plugin's answers and its own
 * output. Every text that comes from the router (an error, a server, a
 * device name, a finding, a log line) goes into the page as a text node:
 * LuCI's E() and dom.append insert a plain string child as HTML, so such
 * text is always passed wrapped in an array or through text(). An error
 * shows once while it lasts, not once per poll; a call rpcd refuses (a
 * read-only login) shows a message instead of an uncaught error.
 */

var shown = {};

/* show(msg, cls) adds msg as a notification unless it is already on screen */
function show(msg, cls) {
	var n = shown[msg];
	if (n && document.body.contains(n))
		return;
	shown[msg] = ui.addNotification(null, E('p', {}, [ msg ]), cls || 'danger');
}

return baseclass.extend({
	/* failed(res): shows what is wrong with a plugin answer, if anything,
	 * and says whether something was */
	failed: function(res) {
		if (res == null || typeof(res) != 'object') {
			show(_('The sqmkit plugin gave no answer (ubus status %s); is sqmkit installed?').format(String(res)));
			return true;
		}
		if (res.error) {
			show(String(res.error));
			return true;
		}
		return false;
	},

	/* warn(msgs): what the router did on its own and says (a dead tune's
	 * rates put back), once each */
	warn: function(msgs) {
		(msgs || []).forEach(function(m) { show(String(m), 'warning'); });
	},

	/* refused(err): a rejected call, as a message; resolves to null */
	refused: function(err) {
		var m = String((err && err.message) || err);
		if (/error -32002/.test(m))
			show(_('Your login may view these pages but not change anything.'));
		else
			show(_('A call to the router failed: %s').format(m.replace(/ \[.*\]| \{.*\}/, '')));
		return null;
	},

	/* call(fn, args...): the plugin call fn(args...), its rejection shown */
	call: function(fn) {
		var args = Array.prototype.slice.call(arguments, 1);
		return fn.apply(null, args).catch(L.bind(this.refused, this));
	},

	/* text(v): v as a child for E() that is never read as markup */
	text: function(v) {
		return document.createTextNode(v == null ? '' : String(v));
	},

	/* cell(title, children): a table cell that names its column, as the
	 * bootstrap theme lays tables out on a phone (data-title) */
	cell: function(title, children, cls) {
		return E('td', { 'class': 'td' + (cls ? ' ' + cls : ''), 'data-title': title }, Array.isArray(children) ? children : [ children ]);
	},

	/* head(titles): a table's title row */
	head: function(titles) {
		return E('tr', { 'class': 'tr table-titles' }, titles.map(function(h) { return E('th', { 'class': 'th' }, [ h ]); }));
	},

	/* redraw(box, key, build): box emptied and filled with build()'s
	 * nodes, unless key (what they show) is what it shows already, so a
	 * poll keeps a reader's selection and place (TestPagesAsRoot's tune);
	 * says whether it drew */
	redraw: function(box, key, build) {
		if (box.sqmkitShown === key)
			return false;
		box.textContent = '';
		build().forEach(function(n) { box.appendChild(n); });
		box.sqmkitShown = key;
		return true;
	},

	/* writable: the login may change things (LuCI's read-only views) */
	writable: function() {
		return L.hasViewPermission() !== false;
	},

	/* confirm(title, text, label): a modal asking before an action */
	confirm: function(title, text, label) {
		return new Promise(function(resolve) {
			ui.showModal(title, [
				E('p', {}, [ text ]),
				E('div', { 'class': 'right' }, [
					E('button', { 'class': 'btn', 'click': function() { ui.hideModal(); resolve(false); } }, [ _('Cancel') ]), ' ',
					E('button', { 'class': 'btn cbi-button-action', 'id': 'sqmkit-confirm', 'click': function() { ui.hideModal(); resolve(true); } }, [ label ])
				])
			]);
		});
	}
});
