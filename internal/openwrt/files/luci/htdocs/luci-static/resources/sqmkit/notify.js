'use strict';
'require baseclass';
'require ui';

/*
 * What every sqmkit page does with the plugin's answers: an error comes
 * back as { error }, shown as LuCI shows a failed action.
 */

return baseclass.extend({
	/* failed(res): shows res.error, if any, and says whether there was one */
	failed: function(res) {
		if (res && res.error) {
			ui.addNotification(null, E('p', {}, res.error), 'danger');
			return true;
		}
		return false;
	}
});
