/*
 * A stand-in of LuCI's client runtime (luci-base's luci.js, rpc.js, ui.js)
 * for the browser tests of luci-app-sqmkit's views: the part of its API the
 * views use, behaving as LuCI's does (docs/hacking.md, "OpenWrt's pieces in
 * the tests"): `L = new LuCI(env)`, class files with 'require' headers
 * compiled into a factory, view.extend with load/render, rpc.declare over
 * ubus JSON-RPC, poll.add in seconds, E(), _(), ui.addNotification.
 * cbi.js beside it holds what LuCI's cbi.js gives every page. The same
 * test page runs LuCI's own files when SQMKIT_LUCI_REAL names them.
 */
(function(window, document) {
	'use strict';

	/* Class: what baseclass.extend makes; new C() runs __init__ */
	function Class() {}
	Class.extend = function(props) {
		var Super = this;
		var C = function() {
			if (typeof(this.__init__) == 'function')
				return this.__init__.apply(this, arguments);
		};
		C.prototype = Object.create(Super.prototype);
		Object.assign(C.prototype, props);
		C.prototype.constructor = C;
		C.extend = Class.extend;
		C.isSubclass = function(o) { return o != null && o.prototype instanceof Class; };
		return C;
	};
	Class.isSubclass = function(o) { return typeof(o) == 'function' && (o === Class || o.prototype instanceof Class); };

	function E(tag, attrs, children) {
		if (typeof(attrs) != 'object' || attrs == null || Array.isArray(attrs) || attrs instanceof Node) {
			children = attrs;
			attrs = null;
		}
		var el = document.createElement(tag);
		for (var k in attrs || {}) {
			var v = attrs[k];
			if (v == null)
				continue;
			if (typeof(v) == 'function')
				el.addEventListener(k, v);
			else
				el.setAttribute(k, v);
		}
		var add = function(c) {
			if (c == null || c === '')
				return;
			if (Array.isArray(c))
				return c.forEach(add);
			el.appendChild(c instanceof Node ? c : document.createTextNode(String(c)));
		};
		add(children);
		return el;
	}

	var env = {}, classes = {}, loaded = false;

	function url() {
		return [env.scriptname].concat(Array.prototype.slice.call(arguments)).join('/');
	}

	/* request: the JSON POST rpc.js makes */
	function post(u, body) {
		return fetch(u, { method: 'POST', headers: { 'Content-Type': 'application/json' }, body: JSON.stringify(body), credentials: 'same-origin' })
			.then(function(res) { return res.json(); });
	}

	var rpcID = 1;
	var rpc = Class.extend({
		declare: function(o) {
			return function() {
				var args = arguments, params = {};
				(o.params || []).forEach(function(p, i) { params[p] = args[i]; });
				var msg = { jsonrpc: '2.0', id: rpcID++, method: 'call', params: [env.sessionid, o.object, o.method, params] };
				return post(url('admin/ubus') + '/' + o.object + '.' + o.method, msg).then(function(res) {
					if (res.error)
						throw new Error('RPC call to %s/%s failed with error %d: %s'.format(o.object, o.method, res.error.code, res.error.message));
					var ret = res.result.length > 1 ? res.result[1] : res.result[0];
					if (o.expect) {
						var key = Object.keys(o.expect)[0];
						if (ret != null && key != '')
							ret = ret[key];
						if (ret == null || Object.prototype.toString.call(ret) != Object.prototype.toString.call(o.expect[key]))
							ret = o.expect[key];
					}
					return ret;
				});
			};
		}
	});

	/* poll: one tick a second; fn runs every interval ticks once loaded */
	var queue = [], tick = 0;
	var poll = Class.extend({
		add: function(fn, interval) {
			if (queue.some(function(e) { return e.fn === fn; }))
				return false;
			queue.push({ fn: fn, i: (interval || env.pollinterval) >>> 0, busy: false });
			return true;
		}
	});
	window.setInterval(function() {
		if (!loaded)
			return;
		tick++;
		queue.forEach(function(e) {
			if (tick % e.i || e.busy)
				return;
			e.busy = true;
			Promise.resolve(e.fn()).finally(function() { e.busy = false; });
		});
	}, 1000);

	var View = Class.extend({
		__init__: function() {
			var vp = document.getElementById('view');
			var self = this;
			return Promise.resolve(this.load()).then(function(data) {
				if (loaded)
					return data;
				return new Promise(function(resolve) {
					document.addEventListener('luci-loaded', function() { resolve(data); }, { once: true });
				});
			}).then(function(data) { return self.render(data); }).then(function(nodes) {
				vp.innerHTML = '';
				vp.appendChild(nodes);
			}).catch(function(err) { L.error(err); });
		},
		load: function() {},
		render: function() {}
	});

	var ui = Class.extend({
		addNotification: function(title, children, cls) {
			var mc = document.querySelector('#maincontent') || document.body;
			var msg = E('div', { 'class': 'alert-message ' + (cls || '') }, [title ? E('h4', {}, title) : '', children]);
			mc.insertBefore(msg, mc.firstChild);
			return msg;
		},
		instantiateView: function(path) {
			return L.require('view.' + path.replace(/\//g, '.')).catch(function(err) { L.error(err); });
		}
	});

	/* LuCI's built-ins as luci.js registers them: classes (baseclass,
	 * view) and singletons (poll); rpc and ui are class files there, whose
	 * require yields an instance */
	var builtin = { baseclass: Class, view: View, poll: new poll(), rpc: new rpc(), ui: new ui(), dom: {}, request: {}, form: {} };

	/* require: a built-in, or a class file whose 'require' lines name its
	 * dependencies, compiled as LuCI compiles it and instantiated once */
	function require(name) {
		if (classes[name])
			return classes[name];
		if (builtin[name])
			return (classes[name] = Promise.resolve(builtin[name]));
		var file = env.base_url + '/' + name.replace(/\./g, '/') + '.js';
		return (classes[name] = fetch(file).then(function(res) {
			if (!res.ok)
				throw new Error('HTTP error %d while loading class file "%s"'.format(res.status, file));
			return res.text();
		}).then(function(src) {
			var deps = [], args = '', re = /^\s*'(use strict|require\s+(\S+)(?:\s+as\s+([a-zA-Z_]\w*))?)';\s*$/;
			var lines = src.split('\n');
			for (var i = 0; i < lines.length; i++) {
				if (/^\s*(\/\/.*)?$/.test(lines[i]))
					continue;
				var m = re.exec(lines[i]);
				if (!m)
					break;
				if (m[2]) {
					deps.push(require(m[2]));
					args += ', ' + (m[3] || m[2].replace(/[^a-zA-Z0-9_]/g, '_'));
				}
			}
			return Promise.all(deps).then(function(instances) {
				var factory = eval('(function(window, document, L%s) { %s })\n//# sourceURL=%s'.format(args, src, file));
				var C = factory.apply(factory, [window, document, L].concat(instances));
				if (!Class.isSubclass(C))
					throw new TypeError('"%s" factory yields invalid constructor'.format(name));
				return new C();
			});
		}));
	}

	function LuCI(setenv) {
		Object.assign(env, setenv);
		var s = document.querySelector('script[src$="/luci.js"]');
		env.base_url = s.getAttribute('src').replace(/\/luci\.js$/, '');
		window.L = this;
		var ready = new Promise(function(resolve) {
			if (document.readyState != 'loading')
				resolve();
			else
				document.addEventListener('DOMContentLoaded', resolve);
		});
		Promise.all([ready, require('ui'), require('rpc'), post(env.ubuspath, { jsonrpc: '2.0', id: 'init', method: 'list' })]).then(function() {
			if (typeof(window.cbi_init) == 'function')
				window.cbi_init();
			loaded = true;
			L.loaded = true;
			document.dispatchEvent(new CustomEvent('luci-loaded'));
		}).catch(function(err) { L.error(err); });
	}
	LuCI.prototype = {
		env: env,
		require: require,
		url: url,
		bind: function(fn, self) { return fn.bind.apply(fn, [self].concat(Array.prototype.slice.call(arguments, 2))); },
		isObject: function(v) { return v != null && typeof(v) == 'object'; },
		resolveDefault: function(p, def) { return Promise.resolve(p).catch(function() { return def; }); },
		raise: function(type, fmt) { throw new Error(type + ': ' + fmt.format.apply(fmt, Array.prototype.slice.call(arguments, 2))); },
		error: function(err) {
			var vp = document.getElementById('view');
			if (vp)
				vp.appendChild(E('pre', { 'class': 'alert-message error' }, String(err && err.stack || err)));
			console.error(err);
		}
	};

	window.LuCI = LuCI;
	window.E = E;
	window._ = function(s) { return s; };
})(window, document);
