// The page behind a vault share link: BASE/s/ID#FRAG.
//
// Security model, in short:
// - The key material (FRAG) lives in the URL fragment. Browsers never send the fragment to
//   any server, so the relay only ever sees the link ID and, at reveal time, the claim secret
//   C, which is derived from the fragment (and the password) but reveals nothing about the
//   content key K. Everything is decrypted here, in the browser.
// - The fragment is taken out of the address bar as soon as it has been read, so it does not
//   stay in the history, in a bookmark or on the screen; it is kept in memory only.
// - Nothing is shown until every chunk of the blob has authenticated: a truncated, reordered
//   or altered blob shows nothing at all rather than a plausible-looking part of the secret.
// - Text is only ever put in the page with textContent (never as HTML).
//
// The link format (must match the relay and Tests/Interop/link_reference.py byte for byte):
//   FRAG = b64url(F) (43 chars) or b64url(F || S) (64 chars, S = 16-byte PBKDF2 salt)
//   IKM  = F, or F || PBKDF2-SHA-256(NFC(password), S, N iterations, 32 bytes)
//   K    = HKDF-SHA-256(IKM, salt "vault-link-v1", info "content")  content key
//   C    = HKDF-SHA-256(IKM, salt "vault-link-v1", info "claim")    claim secret
//   blob = "VLNK" 01 00 00 00 || AES-256-GCM chunks of 64 KiB, nonce 000000 || u64be(i) || last
//   plaintext = u32be(m) || META (m bytes of JSON) || CONTENT

const HEADER = new Uint8Array([0x56, 0x4c, 0x4e, 0x4b, 0x01, 0x00, 0x00, 0x00]);
const CHUNK = 65536;
const PIECE = CHUNK + 16; // a full chunk's ciphertext and its GCM tag
const MIN_ITERATIONS = 600000;
const MAX_ITERATIONS = 10000000;
const META_MIN = 2;
const META_MAX = 4096;
const NAME_MAX = 255;
const MAX_VIEWS = 1000;
const utf8 = new TextEncoder();
const HKDF_SALT = utf8.encode("vault-link-v1");

const MESSAGES = {
  checking: "Checking the link…",
  incomplete: "This link is incomplete or damaged. Check that you copied all of it, including the part after “#”.",
  gone: "This link has expired, was used up, or never existed: there is no secret to show.",
  ready: "This link holds a secret for you.",
  readyPassword: "This link holds a secret for you, protected by a password.",
  needPassword: "Enter the password that came with the link.",
  revealing: "Decrypting…",
  revealingPassword: "Checking the password and decrypting… this can take a few seconds.",
  wrongPassword: "The password or the key in the link is wrong. No view was used: check the password and try again.",
  wrongKey: "The key in this link is wrong: the link is incomplete or damaged. No view was used.",
  damaged: "The key is wrong or the content was damaged; nothing was shown.",
  unsupported: "This link asks for an unsupported password setting.",
  rateLimited: "Too many attempts right now. Wait a minute, then try again.",
  insecure: "This page must be opened over HTTPS: browsers only decrypt on secure pages.",
  unreachable: "Could not reach the server. Check your connection, then try again.",
  unexpected: (code) => `The server answered unexpectedly (HTTP ${code}). Try again in a moment.`,
  lastView: "This was the last view: the secret is now deleted from the server.",
  viewsLeft: (n) => `This link has ${n} view${n === 1 ? "" : "s"} left.`,
  viewsBefore: (n) => n === 1 ? "1 (this is the last)" : `${n}`,
};

class LinkFailure extends Error {
  // state: one of the data-state values; retry: whether trying again could help.
  constructor(state, message, retry = false) {
    super(message);
    this.state = state;
    this.retry = retry;
  }
}

const $ = (id) => document.getElementById(id);
const app = $("app");

function setState(state, message) {
  app.dataset.state = state;
  $("message").textContent = message;
}

// ---------------------------------------------------------------------------------------------
// bytes

function b64urlEncode(bytes) {
  let bin = "";
  for (const b of bytes) bin += String.fromCharCode(b);
  return btoa(bin).replace(/\+/g, "-").replace(/\//g, "_").replace(/=+$/, "");
}

// Strict: url-safe alphabet only, no padding, canonical (the re-encoding must match).
function b64urlDecode(text) {
  if (!/^[A-Za-z0-9_-]*$/.test(text) || text.length % 4 === 1) return null;
  const bin = atob(text.replace(/-/g, "+").replace(/_/g, "/"));
  const bytes = Uint8Array.from(bin, (c) => c.charCodeAt(0));
  return b64urlEncode(bytes) === text ? bytes : null;
}

function concat(parts) {
  const out = new Uint8Array(parts.reduce((n, p) => n + p.length, 0));
  let at = 0;
  for (const p of parts) {
    out.set(p, at);
    at += p.length;
  }
  return out;
}

function nonce(index, last) {
  const iv = new Uint8Array(12); // 00 00 00 || u64be(index) || last
  new DataView(iv.buffer).setBigUint64(3, BigInt(index));
  iv[11] = last ? 1 : 0;
  return iv;
}

function formatSize(n) {
  if (n < 1000) return n === 1 ? "1 byte" : `${n} bytes`;
  const units = ["KB", "MB", "GB", "TB"];
  let value = n / 1000;
  let unit = 0;
  while (value >= 999.5 && unit < units.length - 1) {
    value /= 1000;
    unit += 1;
  }
  return `${value < 9.95 ? value.toFixed(1) : Math.round(value)} ${units[unit]}`;
}

// "in 23 hours (25 Nov 2026, 04:24)": how long from now, by this device's clock, and when in
// its own time zone.
function formatExpiry(expires) {
  const seconds = expires - Date.now() / 1000;
  const count = (n, unit) => `${n} ${unit}${n === 1 ? "" : "s"}`;
  let from;
  if (seconds < 60) from = "in less than a minute";
  else if (seconds < 2 * 3600) from = `in ${count(Math.round(seconds / 60), "minute")}`;
  else if (seconds < 36 * 3600) from = `in ${count(Math.round(seconds / 3600), "hour")}`;
  else from = `in ${count(Math.round(seconds / 86400), "day")}`;
  const when = new Date(expires * 1000).toLocaleString(undefined, { dateStyle: "medium", timeStyle: "short" });
  return `${from} (${when})`;
}

// ---------------------------------------------------------------------------------------------
// keys

async function hkdf(ikm, info) {
  const base = await crypto.subtle.importKey("raw", ikm, "HKDF", false, ["deriveBits"]);
  const bits = await crypto.subtle.deriveBits(
    { name: "HKDF", hash: "SHA-256", salt: HKDF_SALT, info: utf8.encode(info) }, base, 256);
  return new Uint8Array(bits);
}

// Returns the content key K (a non-extractable AES-GCM key) and the claim secret C.
async function deriveKeys(fragment, password, iterations) {
  let ikm = fragment;
  if (password !== null) {
    const f = fragment.subarray(0, 32);
    const salt = fragment.subarray(32, 48);
    const pw = await crypto.subtle.importKey(
      "raw", utf8.encode(password.normalize("NFC")), "PBKDF2", false, ["deriveBits"]);
    const p = new Uint8Array(await crypto.subtle.deriveBits(
      { name: "PBKDF2", hash: "SHA-256", salt, iterations }, pw, 256));
    ikm = concat([f, p]);
    p.fill(0);
  }
  const k = await hkdf(ikm, "content");
  const claim = await hkdf(ikm, "claim");
  if (ikm !== fragment) ikm.fill(0);
  const key = await crypto.subtle.importKey("raw", k, "AES-GCM", false, ["decrypt"]);
  k.fill(0);
  return { key, claim };
}

// ---------------------------------------------------------------------------------------------
// blob

const damaged = () => new LinkFailure("damaged", MESSAGES.damaged);

// Decrypts the whole blob and returns { meta, content }, or throws "damaged". Every chunk is
// authenticated before anything is returned, and the final one must carry last = 1, so a blob
// cut at a chunk boundary fails too.
async function openBlob(key, blob) {
  if (blob.length < HEADER.length || HEADER.some((b, i) => blob[i] !== b)) throw damaged();
  const body = blob.subarray(HEADER.length);
  const full = Math.floor(body.length / PIECE);
  const rest = body.length % PIECE;
  if (body.length === 0 || (rest > 0 && rest < 16)) throw damaged();
  const count = full + (rest > 0 ? 1 : 0);
  const parts = [];
  for (let i = 0; i < count; i++) {
    const piece = body.subarray(i * PIECE, Math.min((i + 1) * PIECE, body.length));
    try {
      parts.push(new Uint8Array(await crypto.subtle.decrypt(
        { name: "AES-GCM", iv: nonce(i, i === count - 1), additionalData: HEADER, tagLength: 128 },
        key, piece)));
    } catch {
      throw damaged();
    }
  }
  return parseStream(concat(parts));
}

function parseStream(stream) {
  if (stream.length < 4) throw damaged();
  const m = new DataView(stream.buffer, stream.byteOffset).getUint32(0);
  if (m < META_MIN || m > META_MAX || 4 + m > stream.length) throw damaged();
  let meta;
  try {
    // fatal: invalid UTF-8 is damage; ignoreBOM: keep a BOM so that JSON.parse rejects it.
    const text = new TextDecoder("utf-8", { fatal: true, ignoreBOM: true })
      .decode(stream.subarray(4, 4 + m));
    meta = JSON.parse(text);
  } catch {
    throw damaged();
  }
  if (meta === null || typeof meta !== "object" || Array.isArray(meta)) throw damaged();
  if (meta.type !== "note" && meta.type !== "file") throw damaged();
  if (meta.type === "file") {
    const name = meta.name;
    const size = typeof name === "string" ? utf8.encode(name).length : 0;
    if (size < 1 || size > NAME_MAX) throw damaged();
    if (typeof name.isWellFormed === "function" && !name.isWellFormed()) throw damaged();
  }
  return { meta, content: stream.subarray(4 + m) };
}

// ---------------------------------------------------------------------------------------------
// the relay

const fetchOptions = { cache: "no-store", credentials: "omit", redirect: "error", referrerPolicy: "no-referrer" };

async function call(url, options = {}) {
  let res;
  try {
    res = await fetch(url, { ...fetchOptions, ...options });
  } catch {
    throw new LinkFailure("error", MESSAGES.unreachable, true);
  }
  if (res.status === 404) throw new LinkFailure("gone", MESSAGES.gone);
  if (res.status === 429) throw new LinkFailure("error", MESSAGES.rateLimited, true);
  return res;
}

// GET /links/ID/status: never uses a view. Returns { password, iterations, views, expires }
// (views and expires null from a relay that does not say them).
async function fetchStatus(id, fragment) {
  const res = await call(`/links/${id}/status`);
  if (res.status !== 200) throw new LinkFailure("error", MESSAGES.unexpected(res.status), true);
  let status;
  try {
    status = await res.json();
  } catch {
    throw new LinkFailure("error", MESSAGES.unexpected(res.status), true);
  }
  if (status === null || typeof status.password !== "boolean") {
    throw new LinkFailure("error", MESSAGES.unexpected(res.status), true);
  }
  // A fragment with a salt for a link without a password (or the reverse) is damaged.
  if (status.password !== (fragment.length === 48)) throw new LinkFailure("damaged", MESSAGES.incomplete);
  // Shown only, never trusted for anything: a relay that lies here only misinforms.
  const views = Number.isSafeInteger(status.views) && status.views >= 1 && status.views <= MAX_VIEWS ? status.views : null;
  const expires = Number.isSafeInteger(status.expires) && status.expires > 0 ? status.expires : null;
  if (!status.password) return { password: false, iterations: 0, views, expires };
  const n = status.iterations;
  // Refuse a weak setting (a relay must not be able to make a password cheap to guess) and an
  // absurd one (a relay must not be able to hang the browser).
  if (!Number.isSafeInteger(n) || n < MIN_ITERATIONS || n > MAX_ITERATIONS) {
    throw new LinkFailure("error", MESSAGES.unsupported);
  }
  return { password: true, iterations: n, views, expires };
}

// POST /links/ID/claim: uses one view. Returns { blob, viewsLeft (number or null) }.
async function claim(id, claimSecret, password) {
  const res = await call(`/links/${id}/claim`, {
    method: "POST",
    headers: { "Content-Type": "application/json" },
    body: JSON.stringify({ claim: b64urlEncode(claimSecret) }),
  });
  if (res.status === 403) {
    throw new LinkFailure("wrong", password ? MESSAGES.wrongPassword : MESSAGES.wrongKey, password);
  }
  if (res.status !== 200) throw new LinkFailure("error", MESSAGES.unexpected(res.status), true);
  let blob;
  try {
    blob = new Uint8Array(await res.arrayBuffer());
  } catch {
    // The view may be spent already; trying again is all that can be done.
    throw new LinkFailure("error", MESSAGES.unreachable, true);
  }
  const left = res.headers.get("Vault-Link-Views-Left");
  return { blob, viewsLeft: /^[0-9]{1,9}$/.test(left ?? "") ? Number(left) : null };
}

// ---------------------------------------------------------------------------------------------
// the page

// Reads the link and takes the fragment out of the address bar at once. From here on the key
// material exists only in this module's memory.
function readLink() {
  const match = /^\/s\/([A-Za-z0-9_-]{22})$/.exec(location.pathname);
  const hash = location.hash.replace(/^#/, "");
  history.replaceState(history.state, "", location.pathname + location.search);
  let fragment = null;
  if (hash.length === 43 || hash.length === 64) fragment = b64urlDecode(hash);
  return { id: match ? match[1] : null, fragment };
}

const link = readLink();
let settings = null; // the status answer
let passwordInput = null;

function show(id, visible) {
  $(id).hidden = !visible;
}

function fail(error, retryStatus) {
  if (!(error instanceof LinkFailure)) {
    console.error(error);
    error = new LinkFailure("error", MESSAGES.unexpected("-"), true);
  }
  setState(error.state, error.message);
  if (error.state !== "wrong" && error.state !== "error") forget();
  show("details", settings !== null && (error.state === "wrong" || error.state === "error") && !retryStatus);
  show("retry-row", retryStatus && error.retry);
  const canClaimAgain = settings !== null && error.retry && !retryStatus;
  show("form", canClaimAgain);
  show("intro", canClaimAgain);
  setBusy(false);
  if (error.state === "wrong" && passwordInput) {
    passwordInput.select();
    passwordInput.focus();
  }
}

// Drops the key material once it can no longer be useful.
function forget() {
  if (link.fragment) link.fragment.fill(0);
  link.fragment = null;
  if (passwordInput) passwordInput.value = "";
}

function setBusy(busy) {
  $("reveal").disabled = busy;
  if (passwordInput) passwordInput.disabled = busy;
}

async function start() {
  setState("loading", MESSAGES.checking);
  show("retry-row", false);
  if (!link.id || !link.fragment) return fail(new LinkFailure("damaged", MESSAGES.incomplete));
  if (!window.isSecureContext || !crypto.subtle) return fail(new LinkFailure("error", MESSAGES.insecure));
  try {
    settings = await fetchStatus(link.id, link.fragment);
  } catch (error) {
    return fail(error, true);
  }
  if (settings.password && !passwordInput) {
    passwordInput = document.createElement("input");
    Object.assign(passwordInput, {
      id: "password", type: "password", name: "password", autocomplete: "off",
      spellcheck: false,
    });
    // Not `required`: the browser's own validation bubble would block the submit event, and
    // the page says what is missing itself.
    passwordInput.setAttribute("autocapitalize", "off");
    $("password-row").append(passwordInput);
    show("password-row", true);
  }
  showDetails(settings);
  show("intro", true);
  show("form", true);
  setState("ready", settings.password ? MESSAGES.readyPassword : MESSAGES.ready);
  if (passwordInput) passwordInput.focus();
}

// Views left and expiry, before Reveal: the reader decides when to spend a view.
function showDetails({ views, expires }) {
  $("views-left").textContent = views === null ? "unknown" : MESSAGES.viewsBefore(views);
  $("expires").textContent = expires === null ? "unknown" : formatExpiry(expires);
  show("details", views !== null || expires !== null);
}

async function reveal() {
  const state = app.dataset.state;
  if (settings === null || !link.fragment || !["ready", "wrong", "error"].includes(state)) return;
  const password = settings.password ? passwordInput.value : null;
  if (password === "") {
    setState("ready", MESSAGES.needPassword);
    passwordInput.focus();
    return;
  }
  // Set synchronously in the click, so that nothing can start a second claim meanwhile.
  setState("revealing", password === null ? MESSAGES.revealing : MESSAGES.revealingPassword);
  setBusy(true);
  let opened;
  let viewsLeft;
  try {
    const keys = await deriveKeys(link.fragment, password, settings.iterations);
    const answer = await claim(link.id, keys.claim, password !== null);
    keys.claim.fill(0);
    viewsLeft = answer.viewsLeft;
    // All or nothing: openBlob returns only once every chunk has authenticated.
    opened = await openBlob(keys.key, answer.blob);
  } catch (error) {
    return fail(error, false);
  }
  forget();
  $("form").remove();
  show("intro", false);
  show("details", false);
  showSecret(opened, viewsLeft);
}

function showSecret({ meta, content }, viewsLeft) {
  const result = $("result");
  let message;
  if (meta.type === "file") {
    const name = meta.name;
    const url = URL.createObjectURL(new Blob([content], { type: "application/octet-stream" }));
    const a = document.createElement("a");
    a.id = "download";
    a.className = "button";
    a.href = url;
    a.download = name;
    a.textContent = `Download ${name} (${formatSize(content.length)})`;
    result.append(a);
    message = "The file is ready.";
  } else {
    const text = new TextDecoder("utf-8", { ignoreBOM: true }).decode(content);
    const pre = document.createElement("pre");
    pre.id = "secret";
    pre.textContent = text;
    const copy = document.createElement("button");
    copy.id = "copy";
    copy.type = "button";
    copy.textContent = "Copy";
    const note = document.createElement("p");
    note.id = "copy-status";
    note.className = "note";
    note.setAttribute("role", "status");
    copy.addEventListener("click", () => copyText(text, pre, note));
    result.append(pre, copy, note);
    message = "Here is the secret.";
  }
  const keep = document.createElement("p");
  keep.className = "note";
  keep.textContent = meta.type === "file"
    ? "Save the file now: this page forgets it when you close or reload it."
    : "Copy it now: this page forgets it when you close or reload it.";
  result.append(keep);
  if (viewsLeft === 0) message += ` ${MESSAGES.lastView}`;
  else if (viewsLeft !== null) message += ` ${MESSAGES.viewsLeft(viewsLeft)}`;
  show("result", true);
  setState("revealed", message);
}

async function copyText(text, pre, note) {
  try {
    if (!navigator.clipboard || !navigator.clipboard.writeText) throw new Error("no clipboard");
    await navigator.clipboard.writeText(text);
    note.textContent = "Copied to the clipboard.";
  } catch {
    // Select the text so that copying by hand is one step away.
    const range = document.createRange();
    range.selectNodeContents(pre);
    const selection = window.getSelection();
    selection.removeAllRanges();
    selection.addRange(range);
    note.textContent = "This browser did not allow copying from the page. The text is selected: copy it with Ctrl+C (⌘C on a Mac, or long-press on a phone).";
  }
}

// A <form> so that Enter in the password field reveals too; it is never submitted (the CSP has
// form-action 'none' anyway), everything goes through fetch.
$("form").addEventListener("submit", (event) => {
  event.preventDefault();
  reveal();
});
$("retry").addEventListener("click", () => start());

start();
