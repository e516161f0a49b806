/*
 * The part of LuCI's cbi.js the views rely on, for the browser tests'
 * stand-in runtime: String.prototype.format (%s, %d, %.Nf, %q) and the
 * cbi_init luci.js calls once the page is loaded.
 */
(function(window) {
	'use strict';

	String.prototype.format = function() {
		var args = arguments, i = 0;
		return this.replace(/%(\.(\d+))?([sdfq%])/g, function(m, _p, prec, conv) {
			if (conv == '%')
				return '%';
			var v = args[i++];
			switch (conv) {
			case 'd': return String(Math.trunc(+v || 0));
			case 'f': return (+v || 0).toFixed(prec != null ? +prec : 6);
			case 'q': return JSON.stringify(String(v));
			}
			return prec != null ? String(v).substring(0, +prec) : String(v);
		});
	};

	window.cbi_init = function() {};
})(window);
