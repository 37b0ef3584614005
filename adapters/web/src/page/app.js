// The web chat's page. Everything the model wrote is untrusted: it is turned into DOM
// nodes by `render` below (elements and text nodes only, never innerHTML), links go only
// to http(s) and open with rel="noopener noreferrer", and the page's Content-Security-Policy
// runs no script but this file.
"use strict";

const $ = (id) => document.getElementById(id);
const store = {
  get(key, fallback) {
    try { const v = localStorage.getItem("hermes." + key); return v === null ? fallback : JSON.parse(v); } catch (_) { return fallback; }
  },
  set(key, value) {
    try { localStorage.setItem("hermes." + key, JSON.stringify(value)); } catch (_) { /* full: keep going in memory */ }
  },
};
const MAX_KEPT = 500;
const RELOGIN = "The gateway was restarted (a login lasts as long as the gateway runs) or its token changed: open the address `hermes-gateway web-url` prints.";

let session = store.get("session", null);
let conversations = store.get("conversations", []);
let current = store.get("current", null);
const items = new Map(); // conversation id -> [item]
const working = new Set();

function randomId(prefix) {
  const bytes = new Uint8Array(12);
  crypto.getRandomValues(bytes);
  return prefix + Array.from(bytes, (b) => b.toString(16).padStart(2, "0")).join("");
}

function itemsOf(chat) {
  if (!items.has(chat)) items.set(chat, store.get("chat." + chat, []));
  return items.get(chat);
}
function saveItems(chat) {
  const list = itemsOf(chat);
  if (list.length > MAX_KEPT) list.splice(0, list.length - MAX_KEPT);
  store.set("chat." + chat, list);
}
function ensureConversation(chat, name) {
  if (!conversations.some((c) => c.id === chat)) {
    conversations.push({ id: chat, name: name || "Conversation " + (conversations.length + 1) });
    store.set("conversations", conversations);
    drawConversations();
  }
}

// ---- Markdown, safely -------------------------------------------------------------
function safeHref(url) {
  try {
    const parsed = new URL(url, location.href);
    return parsed.protocol === "http:" || parsed.protocol === "https:" ? parsed.href : null;
  } catch (_) { return null; }
}
function inline(text, into) {
  // Code spans, bold, italics, links and bare URLs; everything else is text.
  // Every part is bounded, so a hostile line (thousands of "[" or "**") costs little.
  const pattern = /(`{1,3})([^`]{0,2000}?)\1|\*\*([^*]{1,2000}?)\*\*|__([^_]{1,2000}?)__|\*([^*\s][^*]{0,2000}?)\*|_([^_\s][^_]{0,2000}?)_|\[([^\]]{1,500})\]\(([^)\s]{1,2000})\)|(https?:\/\/[^\s<>()]{1,2000}[^\s<>().,;:!?'"])/g;
  let at = 0, m;
  while ((m = pattern.exec(text)) !== null) {
    if (m.index > at) into.appendChild(document.createTextNode(text.slice(at, m.index)));
    if (m[1]) { const c = document.createElement("code"); c.textContent = m[2]; into.appendChild(c); }
    else if (m[3] || m[4]) { const b = document.createElement("strong"); inline(m[3] || m[4], b); into.appendChild(b); }
    else if (m[5] || m[6]) { const i = document.createElement("em"); inline(m[5] || m[6], i); into.appendChild(i); }
    else if (m[7]) { link(m[7], m[8], into); }
    else if (m[9]) { link(m[9], m[9], into); }
    at = pattern.lastIndex;
  }
  if (at < text.length) into.appendChild(document.createTextNode(text.slice(at)));
}
function link(label, url, into) {
  const href = safeHref(url);
  if (!href) { into.appendChild(document.createTextNode(label)); return; }
  const a = document.createElement("a");
  a.href = href; a.rel = "noopener noreferrer"; a.target = "_blank";
  a.textContent = label;
  into.appendChild(a);
}
/// Quotes nest at most this deep; deeper ones are shown as their text.
const MAX_QUOTE_DEPTH = 8;
function render(markdown, depth) {
  depth = depth || 0;
  const root = document.createDocumentFragment();
  const lines = String(markdown).replace(/\r\n?/g, "\n").split("\n");
  let i = 0;
  while (i < lines.length) {
    const line = lines[i];
    const fence = line.match(/^\s*(```|~~~)/);
    if (fence) {
      const body = [];
      i++;
      while (i < lines.length && !lines[i].trim().startsWith(fence[1])) body.push(lines[i++]);
      i++;
      const pre = document.createElement("pre"), code = document.createElement("code");
      code.textContent = body.join("\n");
      pre.appendChild(code); root.appendChild(pre);
      continue;
    }
    if (!line.trim()) { i++; continue; }
    const heading = line.match(/^(#{1,6})\s+(.*)$/);
    if (heading) {
      const h = document.createElement("p"), s = document.createElement("strong");
      inline(heading[2], s); h.appendChild(s); root.appendChild(h); i++;
      continue;
    }
    if (/^\s*([-*_])(\s*\1){2,}\s*$/.test(line)) { root.appendChild(document.createElement("hr")); i++; continue; }
    if (/^\s*>/.test(line) && depth < MAX_QUOTE_DEPTH) {
      const quote = [];
      while (i < lines.length && /^\s*>/.test(lines[i])) quote.push(lines[i++].replace(/^\s*>\s?/, ""));
      const q = document.createElement("blockquote");
      q.appendChild(render(quote.join("\n"), depth + 1));
      root.appendChild(q);
      continue;
    }
    const bullet = /^\s*([-*+]|\d+[.)])\s+/;
    if (bullet.test(line)) {
      const ordered = /^\s*\d/.test(line);
      const list = document.createElement(ordered ? "ol" : "ul");
      while (i < lines.length && bullet.test(lines[i])) {
        const li = document.createElement("li");
        inline(lines[i].replace(bullet, ""), li);
        list.appendChild(li); i++;
      }
      root.appendChild(list);
      continue;
    }
    const para = [];
    while (i < lines.length && lines[i].trim() && !(para.length && /^\s*(```|~~~|#{1,6}\s|>)/.test(lines[i])) && !(para.length && bullet.test(lines[i]))) para.push(lines[i++]);
    const p = document.createElement("p");
    para.forEach((text, n) => { if (n) p.appendChild(document.createElement("br")); inline(text, p); });
    root.appendChild(p);
  }
  return root;
}

// ---- Drawing ------------------------------------------------------------------------
function drawConversations() {
  const nav = $("conversations");
  nav.replaceChildren();
  for (const c of conversations) {
    const b = document.createElement("button");
    b.type = "button"; b.textContent = c.name;
    if (c.id === current) b.className = "current";
    b.addEventListener("click", () => { switchTo(c.id); $("side").classList.remove("open"); });
    nav.appendChild(b);
  }
  const conv = conversations.find((c) => c.id === current);
  $("title").textContent = conv ? conv.name : "Hermes";
}
function drawItem(item) {
  try { return drawItemUnsafe(item); } catch (_) {
    // Whatever it was, the page goes on: the message as plain text.
    const div = document.createElement("div");
    div.className = "msg bot";
    div.dataset.id = item.id;
    div.textContent = item.markdown || item.text || "";
    return div;
  }
}
function drawItemUnsafe(item) {
  const div = document.createElement("div");
  div.className = "msg " + item.who + (item.failed ? " failed" : "");
  div.dataset.id = item.id;
  if (item.who === "me") {
    div.textContent = item.text;
    if (item.failed) {
      const retry = document.createElement("button");
      retry.type = "button"; retry.textContent = "Not sent. Try again";
      retry.addEventListener("click", () => post(item));
      div.appendChild(document.createElement("br")); div.appendChild(retry);
    }
  } else if (item.who === "file") {
    if (item.image) {
      const img = document.createElement("img");
      img.src = item.url; img.alt = item.name || "image";
      div.appendChild(img);
    }
    const a = document.createElement("a");
    a.href = item.url; a.download = item.name || "file"; a.rel = "noopener noreferrer";
    a.textContent = "\u{1F4CE} " + (item.name || "file");
    div.appendChild(document.createElement("div")).appendChild(a);
    if (item.caption) div.appendChild(render(item.caption));
  } else if (item.who === "notice") {
    div.textContent = item.text;
  } else {
    div.appendChild(render(item.markdown || ""));
    if (item.choices && item.choices.length) {
      const row = document.createElement("div");
      row.className = "choices";
      for (const choice of item.choices) {
        const b = document.createElement("button");
        b.type = "button"; b.textContent = choice.label; b.className = choice.style || "normal";
        b.disabled = !!item.pressed;
        b.addEventListener("click", () => press(item, choice, row));
        row.appendChild(b);
      }
      div.appendChild(row);
    }
  }
  return div;
}
function drawMessages() {
  const box = $("messages");
  const atEnd = box.scrollHeight - box.scrollTop - box.clientHeight < 40;
  box.replaceChildren(...(current ? itemsOf(current) : []).map(drawItem));
  if (atEnd) box.scrollTop = box.scrollHeight;
  $("working").hidden = !working.has(current);
}
function upsert(chat, item) {
  ensureConversation(chat);
  const list = itemsOf(chat);
  const at = list.findIndex((x) => x.id === item.id);
  const merged = at >= 0 ? Object.assign(list[at], item) : item;
  if (at < 0) list.push(item);
  saveItems(chat);
  if (chat !== current) return;
  // Only this message is drawn again (a streamed answer is edited many times).
  const box = $("messages");
  const atEnd = box.scrollHeight - box.scrollTop - box.clientHeight < 40;
  const old = Array.from(box.children).find((el) => el.dataset.id === merged.id);
  const drawn = drawItem(merged);
  if (old) old.replaceWith(drawn); else box.appendChild(drawn);
  while (box.children.length > MAX_KEPT) box.firstChild.remove();
  if (atEnd) box.scrollTop = box.scrollHeight;
}

// ---- Talking to the gateway ---------------------------------------------------------
async function api(path, options) {
  const headers = Object.assign({ "X-Hermes-Session": session || "" }, (options && options.headers) || {});
  const response = await fetch(path, Object.assign({}, options, { headers, credentials: "same-origin" }));
  if (response.status === 401) { showLogin(RELOGIN); throw new Error("not logged in"); }
  return response;
}
async function post(item) {
  item.failed = false; upsert(item.chat, item);
  try {
    const r = await api("/api/send", { method: "POST", headers: { "Content-Type": "application/json" }, body: JSON.stringify({ chat: item.chat, id: item.id, text: item.text }) });
    if (!r.ok) throw new Error(String(r.status));
  } catch (_) { item.failed = true; upsert(item.chat, item); }
}
async function press(item, choice, row) {
  row.querySelectorAll("button").forEach((b) => (b.disabled = true));
  try {
    const r = await api("/api/press", { method: "POST", headers: { "Content-Type": "application/json" }, body: JSON.stringify({ chat: currentOf(item), id: randomId("p-"), message_id: item.id, choice: choice.id }) });
    if (!r.ok) throw new Error(String(r.status));
    item.pressed = true; saveItems(currentOf(item));
  } catch (_) { row.querySelectorAll("button").forEach((b) => (b.disabled = false)); }
}
function currentOf(item) { return item.chat || current; }
async function upload(file) {
  const id = randomId("u-");
  const chat = current;
  upsert(chat, { id, chat, who: "me", text: "\u{1F4CE} " + file.name });
  const query = new URLSearchParams({ chat, id, name: file.name });
  try {
    const r = await api("/api/upload?" + query, { method: "POST", headers: { "Content-Type": file.type || "application/octet-stream" }, body: file });
    if (!r.ok) throw new Error(String(r.status));
  } catch (_) { upsert(chat, { id, chat, who: "me", text: "\u{1F4CE} " + file.name + " (not sent)", failed: false }); }
}

function apply(event) {
  const chat = event.chat;
  switch (event.kind) {
    case "message":
      upsert(chat, { id: event.id, chat, who: "bot", markdown: event.markdown, choices: event.choices || [] });
      break;
    case "edit":
      upsert(chat, { id: event.id, chat, who: "bot", markdown: event.markdown, choices: [] });
      break;
    case "file":
      upsert(chat, { id: event.id, chat, who: "file", name: event.name, url: event.url, image: !!event.image, caption: event.caption });
      break;
    case "notice":
      upsert(chat, { id: randomId("n-"), chat, who: "notice", text: event.text });
      break;
    case "working":
      if (event.on) working.add(chat); else working.delete(chat);
      if (chat === current) $("working").hidden = !working.has(chat);
      break;
    case "gap":
      if (current) upsert(current, { id: randomId("n-"), chat: current, who: "notice", text: "Some messages sent while this page was away may be missing." });
      break;
  }
}

let streamOpen = false;
async function listen() {
  let wait = 500;
  for (;;) {
    if (!session) return;
    try {
      const headers = { "X-Hermes-Session": session };
      const last = store.get("last", null);
      if (last) headers["Last-Event-ID"] = last;
      const response = await fetch("/api/events", { headers, credentials: "same-origin" });
      if (response.status === 401) { showLogin(RELOGIN); return; }
      if (!response.ok || !response.body) throw new Error(String(response.status));
      setLink(true); wait = 500;
      const reader = response.body.getReader();
      const decoder = new TextDecoder();
      let buffer = "";
      for (;;) {
        const { value, done } = await reader.read();
        if (done) break;
        buffer += decoder.decode(value, { stream: true });
        let cut;
        while ((cut = buffer.indexOf("\n\n")) >= 0) {
          const block = buffer.slice(0, cut); buffer = buffer.slice(cut + 2);
          let id = null, data = "";
          for (const line of block.split("\n")) {
            if (line.startsWith("id:")) id = line.slice(3).trim();
            else if (line.startsWith("data:")) data += (data ? "\n" : "") + line.slice(5).replace(/^ /, "");
          }
          if (!data) continue;
          try { apply(JSON.parse(data)); } catch (_) { /* not ours */ }
          if (id) store.set("last", id);
        }
      }
    } catch (_) { /* the gateway is away: try again */ }
    setLink(false);
    await new Promise((r) => setTimeout(r, wait));
    wait = Math.min(wait * 2, 8000);
  }
}
function setLink(up) {
  streamOpen = up;
  $("link").textContent = up ? "" : "reconnecting\u2026";
  $("link").className = up ? "" : "down";
}

// ---- Commands -------------------------------------------------------------------------
let commands = [];
async function loadCommands() {
  try { const r = await api("/api/commands"); if (r.ok) commands = await r.json(); } catch (_) { /* none */ }
}
function suggest() {
  const text = $("text").value;
  const box = $("suggest");
  if (!text.startsWith("/") || text.includes(" ")) { box.hidden = true; return; }
  const matches = commands.filter((c) => ("/" + c.name).startsWith(text.toLowerCase()));
  box.replaceChildren(...matches.map((c) => {
    const b = document.createElement("button");
    b.type = "button"; b.textContent = "/" + c.name;
    const d = document.createElement("span"); d.textContent = c.description; b.appendChild(d);
    b.addEventListener("click", () => { $("text").value = "/" + c.name + " "; box.hidden = true; $("text").focus(); });
    return b;
  }));
  box.hidden = matches.length === 0;
}

// ---- Choosing a model -----------------------------------------------------------------
let providers = [];
async function checkSetup() {
  let setup;
  try { const r = await api("/api/setup"); if (!r.ok) return; setup = await r.json(); } catch (_) { return; }
  $("setup").hidden = !!setup.chosen;
  if (setup.chosen) return;
  providers = setup.providers || [];
  const select = $("provider");
  if (!select.options.length) {
    for (const p of providers) {
      const o = document.createElement("option");
      o.value = p.name; o.textContent = p.name;
      select.appendChild(o);
    }
    select.value = "openrouter";
    providerChanged();
  }
  const local = $("local");
  local.replaceChildren();
  for (const server of setup.local || []) {
    for (const model of (server.models || []).slice(0, 5)) {
      const b = document.createElement("button");
      b.type = "button";
      b.textContent = "Use " + model + " from " + server.name + " at " + server.base_url;
      b.addEventListener("click", () => choose({ provider: server.provider, model, base_url: server.base_url }));
      local.appendChild(b);
    }
  }
}
function providerChanged() {
  const p = providers.find((x) => x.name === $("provider").value);
  if (!p) return;
  $("base-url").placeholder = p.base_url || "http://127.0.0.1:8080/v1";
  $("base-url").required = !p.base_url;
  $("key-label").hidden = !p.key_var;
}
async function choose(choice) {
  const said = $("setup-said");
  said.className = ""; said.textContent = "Checking " + choice.model + "\u2026";
  try {
    const r = await api("/api/setup", { method: "POST", headers: { "Content-Type": "application/json" }, body: JSON.stringify(choice) });
    const answer = await r.json();
    if (!r.ok) { said.className = "error"; said.textContent = answer.error || "Not saved."; return; }
    said.textContent = answer.said;
    $("api-key").value = "";
    setTimeout(checkSetup, 1500);
  } catch (_) { said.className = "error"; said.textContent = "The gateway did not answer; try again."; }
}

// ---- Conversations and login ----------------------------------------------------------
function switchTo(chat) {
  current = chat; store.set("current", chat);
  drawConversations(); drawMessages();
}
function newConversation() {
  const id = randomId("c-");
  conversations.push({ id, name: "Conversation " + (conversations.length + 1) });
  store.set("conversations", conversations);
  switchTo(id);
}
function showLogin(why) {
  session = null; store.set("session", null);
  $("login").hidden = false; $("messages").hidden = true; $("composer").hidden = true;
  $("login-error").textContent = why || "";
}
async function login(token) {
  const r = await fetch("/api/login", { method: "POST", headers: { "Content-Type": "application/json" }, body: JSON.stringify({ token }), credentials: "same-origin" });
  if (!r.ok) {
    // A wrong token in an address (a link anyone could make) logs nobody out.
    if (session) return false;
    showLogin("That is not this chat's login token.");
    return false;
  }
  session = (await r.json()).session;
  store.set("session", session);
  $("login").hidden = true; $("messages").hidden = false; $("composer").hidden = false;
  return true;
}

async function start() {
  const fragment = new URLSearchParams(location.hash.slice(1));
  if (fragment.get("token")) {
    // Out of the address bar and the history before anything else.
    history.replaceState(null, "", location.pathname);
    await login(fragment.get("token"));
  }
  if (!session) { showLogin(""); return; }
  if (!conversations.length) newConversation();
  if (!current || !conversations.some((c) => c.id === current)) current = conversations[0].id;
  switchTo(current);
  loadCommands();
  checkSetup();
  listen();
}

$("login-form").addEventListener("submit", async (e) => {
  e.preventDefault();
  if (await login($("token").value.trim())) { $("token").value = ""; start(); }
});
$("composer").addEventListener("submit", (e) => {
  e.preventDefault();
  const text = $("text").value;
  if (!text.trim() || !current) return;
  $("text").value = ""; $("suggest").hidden = true;
  post({ id: randomId("m-"), chat: current, who: "me", text });
});
$("text").addEventListener("keydown", (e) => {
  if (e.key === "Enter" && !e.shiftKey && !e.isComposing) { e.preventDefault(); $("composer").requestSubmit(); }
});
$("text").addEventListener("input", suggest);
$("file").addEventListener("change", () => { const f = $("file").files[0]; if (f) upload(f); $("file").value = ""; });
$("new").addEventListener("click", newConversation);
$("provider").addEventListener("change", providerChanged);
$("setup-form").addEventListener("submit", (e) => {
  e.preventDefault();
  choose({ provider: $("provider").value, model: $("model").value.trim(), base_url: $("base-url").value.trim() || null, api_key: $("api-key").value.trim() || null });
});
$("menu").addEventListener("click", () => $("side").classList.toggle("open"));
$("rename").addEventListener("click", () => {
  const conv = conversations.find((c) => c.id === current);
  if (!conv) return;
  const name = prompt("Name this conversation", conv.name);
  if (name && name.trim()) { conv.name = name.trim().slice(0, 80); store.set("conversations", conversations); drawConversations(); }
});
start();
