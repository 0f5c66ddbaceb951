// The reviewer page: lists review items through the admin API, shows each
// attempt's output beside its violations, validates a corrected output live
// through POST /admin/check, and approves, rejects or reruns.
//
// Every piece of model, client or server text reaches the DOM through
// textContent or createTextNode, never parsed as HTML: an output holding markup
// is shown as the characters it is. The page's Content-Security-Policy
// (no inline script, same origin only) is a second line of defence.
"use strict";

(function () {
  const KEY = "contractd.adminKey"; // sessionStorage: gone when the tab closes
  const REVIEWER = "contractd.reviewer"; // localStorage: a name, not a secret
  const PAGE = 50;
  const CHECK_DELAY = 250; // ms of quiet typing before /admin/check
  const CHECK_RETRY_MAX = 15000; // ms: the longest wait before a failed check is sent again

  const $ = (id) => document.getElementById(id);

  const state = {
    items: [], // list form of the items shown
    cursor: null, // next_cursor of the last page, null at the end
    since: null, // Date: the list stops at items created before it
    sel: -1, // index into items
    item: null, // the selected item, whole
    checkSeq: 0, // the newest /admin/check request; older answers are dropped
    checkTimer: 0,
    checkValid: false, // the editor's text passed the contract and is JSON
    busy: false, // a resolution is in flight
    listSeq: 0,
    more: null, // the promise of the next page on its way (loadMore)
  };

  // ------------------------------------------------------------ DOM helpers

  // el builds an element; children are nodes or strings (as text nodes).
  function el(tag, cls, ...children) {
    const e = document.createElement(tag);
    if (cls) e.className = cls;
    for (const c of children) {
      if (c === null || c === undefined) continue;
      e.appendChild(typeof c === "string" ? document.createTextNode(c) : c);
    }
    return e;
  }

  function clear(node) {
    while (node.firstChild) node.removeChild(node.firstChild);
  }

  function showError(msg) {
    const p = $("error");
    p.textContent = msg;
    p.hidden = !msg;
  }

  function notice(msg) {
    $("notice").textContent = msg;
  }

  // ------------------------------------------------------------------- API

  function key() {
    return sessionStorage.getItem(KEY) || "";
  }

  class APIError extends Error {
    constructor(status, body) {
      const e = (body && body.error) || {};
      super(e.message || "HTTP " + status);
      this.status = status;
      this.code = e.code || "";
      this.violations = e.violations || [];
    }
  }

  async function api(method, path, body) {
    const headers = { Accept: "application/json" };
    const k = key();
    if (k) headers.Authorization = "Bearer " + k;
    const init = { method, headers, cache: "no-store", credentials: "omit", redirect: "error" };
    if (body !== undefined) {
      headers["Content-Type"] = "application/json";
      init.body = JSON.stringify(body);
    }
    const res = await fetch(path, init);
    let data = null;
    try {
      data = await res.json();
    } catch (_) {
      data = null;
    }
    if (!res.ok) throw new APIError(res.status, data);
    return data;
  }

  function describe(err) {
    if (err instanceof APIError) {
      if (err.status === 401) return "The admin key was refused (" + err.code + "): " + err.message;
      return err.message + (err.code ? " (" + err.code + ")" : "");
    }
    return "Request failed: " + (err && err.message ? err.message : String(err));
  }

  // ----------------------------------------------------- JSON as text nodes

  // parseJSON reads one JSON value from text at i, keeping each literal's
  // source text (numbers keep their digits, strings their escapes) so what
  // is shown and edited is what the model wrote, and each value's place in
  // text (s, e). It returns {node, end, values} (values: how many it read)
  // or throws a SyntaxError whose offset is where it stopped (text.length:
  // the text ended first).
  function parseJSON(text, i) {
    const ws = () => {
      while (i < text.length && " \t\r\n".includes(text[i])) i++;
    };
    let values = 0;
    const fail = (what) => {
      const e = new SyntaxError(what + " at offset " + i);
      e.offset = i;
      throw e;
    };
    function str() {
      const start = i++;
      while (i < text.length && text[i] !== '"') {
        if (text[i] === "\\") i++;
        else if (text.charCodeAt(i) < 0x20) fail("control character in string");
        i++;
      }
      if (i >= text.length) fail("unterminated string");
      i++;
      const raw = text.slice(start, i);
      let val;
      try {
        val = JSON.parse(raw);
      } catch (_) {
        fail("invalid escape in string"); // at its end
      }
      return { t: "str", raw, val, s: start, e: i };
    }
    // list reads the members of an object or array, from its opening
    // bracket at i to close, one member() before each ',' or close.
    function list(close, member) {
      i++;
      const out = [];
      ws();
      if (text[i] === close) {
        i++;
        return out;
      }
      for (;;) {
        out.push(member());
        ws();
        if (text[i] === ",") {
          i++;
          continue;
        }
        if (text[i] === close) {
          i++;
          return out;
        }
        fail("expected ',' or '" + close + "'");
      }
    }
    function value() {
      values++;
      ws();
      const s = i;
      const n = value1();
      n.s = s;
      n.e = i;
      return n;
    }
    function value1() {
      const c = text[i];
      if (c === "{") {
        const entries = list("}", () => {
          ws();
          if (text[i] !== '"') fail("expected a property name");
          const k = str();
          ws();
          if (text[i] !== ":") fail("expected ':'");
          i++;
          return { k, v: value() };
        });
        return { t: "obj", entries };
      }
      if (c === "[") return { t: "arr", items: list("]", value) };
      if (c === '"') return str();
      const m = /^(?:-?(?:0|[1-9]\d*)(?:\.\d+)?(?:[eE][+-]?\d+)?|true|false|null)/.exec(text.slice(i, i + 400));
      if (!m) fail("unexpected character");
      i += m[0].length;
      return { t: "lit", raw: m[0] };
    }
    const node = value();
    return { node, end: i, values };
  }

  // parseWhole parses text that must be exactly one JSON value.
  function parseWhole(text) {
    const r = parseJSON(text, 0);
    if (text.slice(r.end).trim() !== "") throw new SyntaxError("text after the JSON value at offset " + r.end);
    return r;
  }

  function ptr(base, token) {
    return base + "/" + String(token).replace(/~/g, "~0").replace(/\//g, "~1");
  }

  // FULL is how many JSON values an output may hold to be laid out (one
  // value a line, a span per value, colours; the editor starts from that
  // layout too). A larger one is shown as written, with spans only on its
  // violations' paths and their ancestors: a 1 MiB output laid out was
  // 160,000 lines and elements, and the tab froze for about a minute.
  const FULL = 5000;

  // render appends node as indented JSON text to parent; every value (and
  // every object member, key included) is a span carrying its JSON Pointer
  // in data-path, for highlighting.
  function render(node, path, indent, parent) {
    const span = el("span", "v");
    span.dataset.path = path;
    const pad = "  ".repeat(indent + 1);
    const text = (t) => span.appendChild(document.createTextNode(t));
    // block writes open, each member on its own line, and close.
    const block = (open, close, members, each) => {
      if (!members.length) {
        text(open + close);
        return;
      }
      text(open + "\n");
      members.forEach((x, n) => {
        each(x, n);
        text(n < members.length - 1 ? ",\n" : "\n");
      });
      text("  ".repeat(indent) + close);
    };
    switch (node.t) {
      case "obj":
        block("{", "}", node.entries, (e) => {
          const m = el("span", "m");
          m.dataset.path = ptr(path, e.k.val);
          m.appendChild(document.createTextNode(pad));
          m.appendChild(el("span", "k", e.k.raw));
          m.appendChild(document.createTextNode(": "));
          render(e.v, ptr(path, e.k.val), indent + 1, m);
          span.appendChild(m);
        });
        break;
      case "arr":
        block("[", "]", node.items, (v, n) => {
          text(pad);
          render(v, ptr(path, n), indent + 1, span);
        });
        break;
      default:
        span.classList.add(node.t === "str" ? "s" : "l");
        text(node.raw);
    }
    // An object member's value is marked through the member span.
    if (parent.classList && parent.classList.contains("m")) delete span.dataset.path;
    parent.appendChild(span);
  }

  // renderSource appends text[node.s:node.e] to parent as written; a value
  // whose path want accepts is a span carrying it in data-path (an object
  // member's span holds its key too). Only wanted values are descended
  // into, so the work is the text's length plus the wanted paths.
  function renderSource(text, node, parent, want) {
    const stack = [parent];
    let pos = node.s;
    const upTo = (at) => {
      if (at > pos) stack[stack.length - 1].appendChild(document.createTextNode(text.slice(pos, at)));
      pos = at;
    };
    const open = (cls, path, at) => {
      upTo(at);
      const s = el("span", cls);
      s.dataset.path = path;
      stack[stack.length - 1].appendChild(s);
      stack.push(s);
    };
    const close = (at) => {
      upTo(at);
      stack.pop();
    };
    const inside = (node, path) => {
      if (node.t === "obj") {
        for (const e of node.entries) {
          const p = ptr(path, e.k.val);
          if (!want(p)) continue;
          open("m", p, e.k.s);
          inside(e.v, p);
          close(e.v.e);
        }
      } else if (node.t === "arr") {
        node.items.forEach((v, n) => {
          const p = ptr(path, n);
          if (!want(p)) return;
          open("v", p, v.s);
          inside(v, p);
          close(v.e);
        });
      }
    };
    inside(node, "");
    upTo(node.e);
  }

  // wanted is a want for renderSource: the given JSON Pointers and their
  // ancestors.
  function wanted(paths) {
    const set = new Set();
    for (let p of paths) {
      p = p || "";
      while (p !== "" && !set.has(p)) {
        set.add(p);
        p = p.slice(0, p.lastIndexOf("/"));
      }
    }
    return (p) => set.has(p);
  }

  // pretty is render as a string (the editor's starting text).
  function pretty(node, indent) {
    const pad = "  ".repeat(indent + 1);
    const end = "  ".repeat(indent);
    switch (node.t) {
      case "obj":
        if (!node.entries.length) return "{}";
        return "{\n" + node.entries.map((e) => pad + e.k.raw + ": " + pretty(e.v, indent + 1)).join(",\n") + "\n" + end + "}";
      case "arr":
        if (!node.items.length) return "[]";
        return "[\n" + node.items.map((v) => pad + pretty(v, indent + 1)).join(",\n") + "\n" + end + "]";
      default:
        return node.raw;
    }
  }

  // showOutput fills pre with a model output: the JSON value it holds
  // rendered with paths (prose around it kept as plain text), or the text
  // as it is when it holds none. paths, when given, are the ones to be
  // highlighted (an output of more than FULL values marks only those). A
  // '{' or '[' whose value runs to the end of the text unclosed (an output
  // cut short) ends the search: the text is shown as it is, and no later
  // bracket inside it is tried as a fresh start (that was quadratic); nor
  // are more than about twice the text's length of characters read in all.
  // It returns the index of the marked spans by path.
  function showOutput(pre, text, paths) {
    clear(pre);
    text = text || "";
    let budget = 2 * text.length + 1024;
    for (let i = 0; i < text.length && budget > 0; i++) {
      if (text[i] !== "{" && text[i] !== "[") continue;
      let r;
      try {
        r = parseJSON(text, i);
      } catch (e) {
        if (!(e instanceof SyntaxError) || e.offset >= text.length) break; // cut short, or nested too deep
        budget -= e.offset - i + 1;
        continue;
      }
      if (i > 0) pre.appendChild(el("span", "prose", text.slice(0, i)));
      if (r.values <= FULL) render(r.node, "", 0, pre);
      else renderSource(text, r.node, pre, wanted(paths || []));
      if (r.end < text.length) pre.appendChild(el("span", "prose", text.slice(r.end)));
      return index(pre);
    }
    pre.appendChild(document.createTextNode(text));
    return index(pre);
  }

  function index(pre) {
    const m = new Map();
    for (const s of pre.querySelectorAll("[data-path]")) if (!m.has(s.dataset.path)) m.set(s.dataset.path, s);
    return m;
  }

  // mark highlights the span of path in pre (spans: showOutput's index),
  // or its nearest ancestor that exists (a missing property marks the
  // object that lacks it). The root (path "", or text that is not JSON)
  // marks the frame of pre instead, so the paths inside stay visible.
  function mark(pre, spans, path, cls) {
    let p = path || "";
    while (p !== "") {
      const s = spans.get(p);
      if (s) {
        s.classList.add(cls);
        return s;
      }
      p = p.slice(0, p.lastIndexOf("/"));
    }
    pre.classList.add(cls + "-all");
    return null;
  }

  function unmark(pre, cls) {
    for (const s of pre.querySelectorAll("." + cls)) s.classList.remove(cls);
    pre.classList.remove(cls + "-all");
  }

  // ------------------------------------------------------------------- list

  function parseSince(s) {
    s = s.trim();
    if (!s) return null;
    const re = /(\d+(?:\.\d+)?)(ms|s|m|h|d)/gy;
    const unit = { ms: 1, s: 1e3, m: 6e4, h: 36e5, d: 864e5 };
    let total = 0;
    let m;
    let at = 0;
    while ((m = re.exec(s))) {
      total += parseFloat(m[1]) * unit[m[2]];
      at = re.lastIndex;
    }
    if (at === s.length && at > 0) return new Date(Date.now() - total);
    // A date starts with its year: Date.parse alone also reads "5" (a
    // duration without its unit) as May 2001, which filtered nothing.
    const t = /^\d{4}-\d\d-\d\d/.test(s) ? Date.parse(s) : NaN;
    if (!isNaN(t)) return new Date(t);
    throw new Error("Since: use a duration such as 24h or 90m, or a date such as 2026-11-24T08:00:00Z");
  }

  function listQuery() {
    const q = new URLSearchParams();
    q.set("limit", String(PAGE));
    const status = $("f-status").value;
    if (status) q.set("status", status);
    for (const f of ["route", "contract", "rule"]) {
      const v = $("f-" + f).value.trim();
      if (v) q.set(f, v);
    }
    return q;
  }

  // loadList fetches the first page (more=false) or the next one.
  async function loadList(more) {
    const seq = ++state.listSeq;
    let q;
    try {
      if (!more) state.since = parseSince($("f-since").value);
      q = listQuery();
    } catch (e) {
      showError(e.message);
      return;
    }
    if (more && state.cursor) q.set("cursor", state.cursor);
    let page;
    try {
      page = await api("GET", "/admin/reviews?" + q.toString());
    } catch (e) {
      if (seq !== state.listSeq) return;
      showError(describe(e));
      if (e instanceof APIError && e.status === 401) {
        state.items = [];
        renderList();
        showDetail(null);
        $("key").focus();
      }
      return;
    }
    if (seq !== state.listSeq) return;
    showError("");
    let items = page.items || [];
    let cursor = page.next_cursor || null;
    if (state.since) {
      // Newest first: the first item older than since ends the list.
      const cut = items.findIndex((it) => new Date(it.created_at) < state.since);
      if (cut >= 0) {
        items = items.slice(0, cut);
        cursor = null;
      }
    }
    const keep = !more && state.item ? state.item.id : null;
    state.items = more ? state.items.concat(items) : items;
    state.cursor = cursor;
    renderList();
    if (more) return;
    let i = keep ? state.items.findIndex((it) => it.id === keep) : -1;
    if (i < 0) i = state.items.length ? 0 : -1;
    select(i);
  }

  function renderList() {
    const ul = $("items");
    clear(ul);
    state.items.forEach((it, n) => ul.appendChild(entry(it, n)));
    $("empty").hidden = state.items.length > 0;
    $("more").hidden = !state.cursor;
  }

  // entry is item it's line in the list, at index n: its rule summary is
  // every rule its attempts broke, in order.
  function entry(it, n) {
    const rules = [];
    for (const a of it.attempts || []) for (const v of a.violations || []) if (!rules.includes(v.rule)) rules.push(v.rule);
    const li = el(
      "li",
      "item " + it.status,
      el("span", "id", it.id),
      el("span", "route", it.route),
      el("span", "contract", it.contract && it.contract.name),
      el("span", "time", when(it.created_at)),
      el("span", "rules", rules.join(", ")),
    );
    li.setAttribute("role", "option");
    li.id = "item-" + n;
    li.dataset.index = String(n);
    li.setAttribute("aria-selected", n === state.sel ? "true" : "false");
    return li;
  }

  // refresh puts it, as read now (fetched whole, or a rerun's answer), in
  // place of item i of the list, so its line (status, rule summary) is
  // the item's now: a rerun's attempts, another reviewer's resolution.
  function refresh(i, it) {
    if (i < 0 || i >= state.items.length || state.items[i].id !== it.id) return;
    const { request: _, ...listed } = it; // lists omit request
    state.items[i] = listed;
    const ul = $("items");
    if (ul.children[i]) ul.replaceChild(entry(listed, i), ul.children[i]);
  }

  function when(t) {
    return t ? String(t).replace("T", " ").replace(/\.\d+/, "") : "";
  }

  // select shows item i (fetching it whole); -1 shows nothing. Until item
  // i arrives the detail may still show the one before: shown() is false
  // meanwhile, so no action reaches that one. A failed fetch hides it.
  async function select(i) {
    if (i >= state.items.length) i = state.items.length - 1;
    state.sel = i;
    updateButtons();
    const ul = $("items");
    for (const li of ul.children) li.setAttribute("aria-selected", li.dataset.index === String(i) ? "true" : "false");
    if (i < 0) {
      ul.removeAttribute("aria-activedescendant");
      showDetail(null);
      return;
    }
    ul.setAttribute("aria-activedescendant", "item-" + i);
    const li = ul.children[i];
    if (li && li.scrollIntoView) li.scrollIntoView({ block: "nearest" });
    const id = state.items[i].id;
    try {
      const it = await api("GET", "/admin/reviews/" + encodeURIComponent(id));
      if (state.sel !== i || state.items[i].id !== id) return; // moved on meanwhile
      refresh(i, it); // resolved or rerun since the list was read
      showError("");
      showDetail(it);
    } catch (e) {
      if (state.sel !== i || state.items[i].id !== id) return;
      showDetail(null);
      showError(describe(e));
    }
  }

  // shown reports whether the detail shows the item the list has selected.
  function shown() {
    const it = state.item;
    return !!it && state.sel >= 0 && state.sel < state.items.length && state.items[state.sel].id === it.id;
  }

  // move selects the item d places from the selected one. Past the last
  // item loaded, when the server has more (a cursor), it loads the next
  // page first, as Load more does: j stopped at the end of the page.
  async function move(d) {
    if (!state.items.length) return;
    if (state.sel + d >= state.items.length && state.cursor) {
      const from = state.sel;
      const id = from >= 0 ? state.items[from].id : null;
      await loadMore();
      // Moved, or another list read, meanwhile: that one stands.
      if (state.sel !== from || (id !== null && (!state.items[from] || state.items[from].id !== id))) return;
    }
    const i = Math.min(Math.max(state.sel + d, 0), state.items.length - 1);
    if (i !== state.sel) select(i);
  }

  // loadMore loads the page after the loaded ones; while one is on its
  // way, another call waits for that one rather than asking again.
  function loadMore() {
    if (!state.more) state.more = loadList(true).finally(() => (state.more = null));
    return state.more;
  }

  // --------------------------------------------------------------- detail

  function showDetail(it) {
    const before = state.item;
    state.item = it;
    $("detail").hidden = !it;
    clearTimeout(state.checkTimer);
    state.checkSeq++;
    if (!it) return;
    $("d-title").textContent = it.id;
    const meta = $("d-meta");
    clear(meta);
    const row = (k, v) => {
      meta.appendChild(el("dt", null, k));
      meta.appendChild(el("dd", null, v));
    };
    row("status", it.status);
    row("route", it.route);
    row("contract", it.contract ? it.contract.name + " (" + String(it.contract.sha256 || "").slice(0, 12) + ")" : "");
    row("prompt", it.prompt ? it.prompt.name + " (" + String(it.prompt.sha256 || "").slice(0, 12) + ")" : "");
    row("created", when(it.created_at));
    if (it.resolved_at) row("resolved", when(it.resolved_at));
    row("key id", it.key_id || "(no client key)");

    const input = $("d-input");
    clear(input);
    if (typeof it.input === "string") input.appendChild(document.createTextNode(it.input));
    else showOutput(input, JSON.stringify(it.input));

    const box = $("d-attempts");
    clear(box);
    for (const a of it.attempts || []) box.appendChild(attemptView(a));

    const res = $("d-resolution");
    res.hidden = !it.resolution;
    if (it.resolution) {
      const r = it.resolution;
      $("d-resolution-by").textContent = r.by + (r.reviewer ? " · " + r.reviewer : "") + (r.note ? " · " + r.note : "");
      const body = $("d-resolution-body");
      clear(body);
      body.hidden = r.output === null || r.output === undefined;
      if (!body.hidden) showOutput(body, JSON.stringify(r.output));
    }

    const pending = it.status === "pending";
    $("d-actions").hidden = !pending;
    if (pending) {
      const atts = it.attempts || [];
      const last = atts.length ? atts[atts.length - 1].output || "" : "";
      let start = last;
      try {
        const r = parseWhole(last);
        if (r.values <= FULL) start = pretty(r.node, 0);
      } catch (_) {
        // not one JSON value (prose, truncated): the text as it is
      }
      // The same item again, unchanged (k back to it before the fetch j
      // started came back, or its own fetch arriving after the list's):
      // what the reviewer has typed stays, and is checked again.
      const same = before && before.id === it.id && before.status === it.status && (before.attempts || []).length === atts.length;
      if (!same) {
        $("editor").value = start;
        $("note").value = "";
      }
      scheduleCheck(0);
    }
  }

  function attemptView(a) {
    const head = el(
      "h4",
      null,
      "Attempt " + a.attempt + " · temperature " + a.temperature + " · " + (a.finish_reason || "") + (a.shortened ? " · shortened" : ""),
    );
    const pre = el("pre", "json output");
    pre.tabIndex = 0;
    const vs = a.violations || [];
    const spans = showOutput(pre, a.output, vs.map((v) => v.path));
    const list = el("ul", "violations");
    for (const v of vs) {
      const li = el("li", null, el("span", "rule", v.rule), " ", el("code", "path", v.path || "(root)"), " ", el("span", "msg", v.message));
      li.tabIndex = 0;
      mark(pre, spans, v.path, "hl");
      const on = () => mark(pre, spans, v.path, "focus");
      const off = () => unmark(pre, "focus");
      li.addEventListener("mouseenter", on);
      li.addEventListener("mouseleave", off);
      li.addEventListener("focus", on);
      li.addEventListener("blur", off);
      list.appendChild(li);
    }
    return el("div", "attempt", head, el("div", "pair", pre, list));
  }

  // ------------------------------------------------------------ live check

  function scheduleCheck(delay) {
    clearTimeout(state.checkTimer);
    const seq = ++state.checkSeq;
    state.checkValid = false;
    updateButtons();
    $("check-state").textContent = "checking…";
    $("check-state").className = "";
    state.checkTimer = setTimeout(() => runCheck(seq), delay);
  }

  // retryable reports whether a failed /admin/check may pass when sent
  // again unchanged: the server unreachable, busy or failing (5xx, 429,
  // 408). A 4xx about the request itself (413, a 401 key) would fail again.
  function retryable(err) {
    if (!(err instanceof APIError)) return true;
    return err.status >= 500 || err.status === 429 || err.status === 408;
  }

  // runCheck sends the editor's text to /admin/check; tries counts the
  // failed sends before it. A retryable failure is shown as failed (approve
  // disabled) and the same check sent again after 1, 2, 4 … s (at most
  // CHECK_RETRY_MAX) until it answers: it stayed failed until the reviewer
  // typed again. Typing, or another item, cancels the retry (checkSeq).
  async function runCheck(seq, tries) {
    tries = tries || 0;
    const it = state.item;
    if (!it) return;
    const text = $("editor").value;
    let local = null;
    try {
      parseWhole(text);
    } catch (e) {
      local = e.message;
    }
    let verdict;
    try {
      verdict = await api("POST", "/admin/check", { route: it.route, output: text, input: it.input });
    } catch (e) {
      if (seq !== state.checkSeq) return;
      if (!retryable(e)) {
        showCheck(false, "check failed: " + describe(e), [], "failed");
        return;
      }
      const wait = Math.min(1000 * 2 ** tries, CHECK_RETRY_MAX);
      showCheck(false, "check failed: " + describe(e) + "; checking again in " + wait / 1000 + " s", [], "failed");
      state.checkTimer = setTimeout(() => runCheck(seq, tries + 1), wait);
      return;
    }
    if (seq !== state.checkSeq) return;
    const vs = verdict.violations || [];
    if (local !== null && verdict.valid) {
      // The contract would extract JSON from prose; approve needs the JSON alone.
      showCheck(false, "not a JSON value by itself: " + local, vs);
      return;
    }
    showCheck(verdict.valid, verdict.valid ? "valid: passes the contract" : vs.length + " violation" + (vs.length === 1 ? "" : "s"), vs);
  }

  // showCheck shows a verdict (cls "ok" or "bad" by valid) or, with cls
  // "failed", a check that got no verdict.
  function showCheck(valid, msg, vs, cls) {
    state.checkValid = valid;
    const st = $("check-state");
    st.textContent = msg;
    st.className = cls || (valid ? "ok" : "bad");
    const ul = $("check-violations");
    clear(ul);
    for (const v of vs) ul.appendChild(el("li", null, el("span", "rule", v.rule), " ", el("code", "path", v.path || "(root)"), " ", el("span", "msg", v.message)));
    updateButtons();
  }

  function updateButtons() {
    const pending = shown() && state.item.status === "pending";
    $("approve").disabled = !pending || state.busy || !state.checkValid;
    $("reject").disabled = !pending || state.busy;
    $("rerun").disabled = !pending || state.busy;
  }

  // ------------------------------------------------------------ resolution

  function reviewer() {
    const r = $("reviewer").value.trim();
    if (!r) {
      showError("Enter your reviewer name first.");
      $("reviewer").focus();
    }
    return r;
  }

  async function act(kind) {
    const it = state.item;
    if (!shown() || it.status !== "pending" || state.busy) return;
    if (kind === "approve" && !state.checkValid) return;
    let body;
    if (kind !== "rerun") {
      const who = reviewer();
      if (!who) return;
      body = { reviewer: who, note: $("note").value };
      if (kind === "approve") body.output = $("editor").value;
    }
    const had = document.activeElement;
    state.busy = true;
    updateButtons();
    notice(kind === "rerun" ? "rerunning " + it.id + "…" : "");
    try {
      const out = await api("POST", "/admin/reviews/" + encodeURIComponent(it.id) + "/" + kind, body);
      showError("");
      if (out.status === "pending") {
        notice("rerun of " + it.id + " still fails the contract; its new attempts are below");
        refresh(state.items.findIndex((x) => x.id === it.id), out);
        if (state.item && state.item.id === it.id) showDetail(out);
      } else {
        notice(it.id + " " + out.status + (out.resolution && out.resolution.by === "rerun" ? " by rerun" : ""));
        resolvedAway(it.id, out);
      }
    } catch (e) {
      if (e instanceof APIError && e.status === 422 && e.violations.length) {
        showCheck(false, "the contract rejects this output: " + e.message, e.violations);
      } else if (e instanceof APIError && e.code === "review_already_resolved") {
        notice(it.id + " was already resolved by someone else");
        resolvedAway(it.id, null);
      } else {
        showError(describe(e));
      }
    } finally {
      state.busy = false;
      updateButtons();
      keepFocus(had);
    }
  }

  // keepFocus puts the focus back when an action dropped it to <body> (its
  // button was disabled while busy): on had if it can still take it, else
  // on the list (the next item is selected there), so Tab and the keys go
  // on from there rather than from the top of the page.
  function keepFocus(had) {
    const a = document.activeElement;
    if (a && a !== document.body) return;
    if (had && had !== document.body && had.isConnected && !had.disabled && had.offsetParent !== null) had.focus();
    else $("items").focus();
  }

  // resolvedAway drops a resolved item from a pending list (and shows the
  // next one), or refreshes it in place in any other list: with out, or
  // (resolved by someone else) fetched again as it is now.
  function resolvedAway(id, out) {
    const i = state.items.findIndex((x) => x.id === id);
    if (i < 0) return;
    if ($("f-status").value === "pending") {
      state.items.splice(i, 1);
      state.sel = -1;
      if (!state.items.length && state.cursor) {
        // The loaded items are all resolved, more wait behind the cursor:
        // the first page again is those (resolved ones are not pending).
        loadList(false);
        return;
      }
      renderList();
      select(Math.min(i, state.items.length - 1));
      return;
    }
    if (out) {
      state.items[i] = out;
      renderList();
    }
    select(i);
  }

  // -------------------------------------------------------------- keyboard

  function typing(t) {
    return t && (t.tagName === "INPUT" || t.tagName === "TEXTAREA" || t.tagName === "SELECT" || t.isContentEditable);
  }

  function onKey(ev) {
    if (ev.ctrlKey || ev.metaKey || ev.altKey) return;
    if (typing(ev.target)) {
      if (ev.key === "Escape") {
        ev.target.blur();
        $("items").focus();
      }
      return;
    }
    const k = ev.key;
    const go = {
      j: () => move(1),
      ArrowDown: () => move(1),
      k: () => move(-1),
      ArrowUp: () => move(-1),
      a: () => act("approve"),
      r: () => act("reject"),
      u: () => act("rerun"),
      // Only on the item shown as selected: while the next one loads the
      // editor on screen is the item's before it (as a, r and u do nothing).
      e: () => shown() && !$("d-actions").hidden && $("editor").focus(),
      "/": () => $("f-route").focus(),
    }[k];
    if (!go) return;
    if (k.startsWith("Arrow") && ev.target !== $("items")) return; // arrows scroll elsewhere
    ev.preventDefault();
    go();
  }

  // ----------------------------------------------------------------- start

  function start() {
    // #key=K: taken into sessionStorage and dropped from the address bar.
    const m = /(?:^#|&)key=([^&]*)/.exec(location.hash);
    if (m) {
      let k = m[1];
      try {
        k = decodeURIComponent(k);
      } catch (_) {
        // not percent-encoding (a lone %): the key as written
      }
      sessionStorage.setItem(KEY, k);
      history.replaceState(null, "", location.pathname + location.search);
    }
    $("key").value = key();
    $("reviewer").value = localStorage.getItem(REVIEWER) || "";

    $("key-form").addEventListener("submit", (ev) => {
      ev.preventDefault();
      const k = $("key").value.trim();
      if (k) sessionStorage.setItem(KEY, k);
      else sessionStorage.removeItem(KEY);
      notice(k ? "key set for this tab" : "key cleared");
      loadList(false);
    });
    $("key-forget").addEventListener("click", () => {
      sessionStorage.removeItem(KEY);
      $("key").value = "";
      notice("key forgotten");
    });
    $("reviewer").addEventListener("change", () => localStorage.setItem(REVIEWER, $("reviewer").value.trim()));
    $("filters").addEventListener("submit", (ev) => {
      ev.preventDefault();
      loadList(false);
    });
    $("f-status").addEventListener("change", () => loadList(false));
    $("more").addEventListener("click", () => loadMore());
    $("items").addEventListener("click", (ev) => {
      const li = ev.target.closest("li[data-index]");
      if (li) select(Number(li.dataset.index));
    });
    $("editor").addEventListener("input", () => scheduleCheck(CHECK_DELAY));
    $("approve").addEventListener("click", () => act("approve"));
    $("reject").addEventListener("click", () => act("reject"));
    $("rerun").addEventListener("click", () => act("rerun"));
    document.addEventListener("keydown", onKey);

    updateButtons();
    loadList(false);
  }

  start();
})();
