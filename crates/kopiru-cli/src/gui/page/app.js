// kopiru gui: the page. It only shows what the server sends on its event
// stream (/api/events) and sends what the user asks (POST /api/...); the
// server and its root helper check everything again. No framework; no
// inline script (the Content-Security-Policy forbids it).
"use strict";

const $ = (id) => document.getElementById(id);
let state = { drives: [], jobs: [], home: "" };
const ticked = new Set();
// Results already announced, by "job:device".
const announced = new Set();
// The first state received: what had ended before this page opened is
// shown on its card, not announced again.
let firstState = true;
// The OS list's entries, and the chosen one's extract_sha256.
let catalogItems = [];
let expectedImageSha = null;
let backupNameEdited = false;

// ---- words ------------------------------------------------------------

function bytes(n) {
  if (n === null || n === undefined) return "?";
  const units = ["B", "KiB", "MiB", "GiB", "TiB"];
  let i = 0;
  let v = n;
  while (v >= 1024 && i < units.length - 1) { v /= 1024; i++; }
  return (i === 0 ? v.toFixed(0) : v.toFixed(1)) + " " + units[i];
}

function rate(r) {
  return r === null || r === undefined ? "…" : bytes(r) + "/s";
}

function duration(s) {
  if (s === null || s === undefined || !isFinite(s)) return "?";
  s = Math.round(s);
  if (s < 60) return s + " s";
  const m = Math.floor(s / 60);
  if (m < 60) return m + " min " + (s % 60) + " s";
  return Math.floor(m / 60) + " h " + (m % 60) + " min";
}

function el(tag, attrs, ...children) {
  const e = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs || {})) {
    if (k === "class") e.className = v;
    else if (k === "text") e.textContent = v;
    else e.setAttribute(k, v);
  }
  for (const c of children) if (c) e.append(c);
  return e;
}

// The job the action message ("Flashing ...: see the progress below") is
// about: the message goes when that job ends, where its result is shown.
let announcedJob = null;

function say(id, text, kind) {
  if (id === "action-message") announcedJob = null;
  const m = $(id);
  m.textContent = text || "";
  m.className = "message" + (kind ? " " + kind : "");
}

// ---- talking to the server --------------------------------------------

async function post(path, body) {
  const r = await fetch(path, {
    method: "POST",
    headers: { "Content-Type": "application/json" },
    body: JSON.stringify(body),
    credentials: "same-origin",
  });
  let v = {};
  try { v = await r.json(); } catch (_) { v = { error: r.status + " " + r.statusText }; }
  if (!r.ok) throw new Error(v.error || r.statusText);
  return v;
}

function connect() {
  const es = new EventSource("/api/events");
  es.onopen = () => { $("connection").textContent = "Connected to kopiru."; };
  es.onmessage = (e) => {
    state = JSON.parse(e.data);
    if (firstState) {
      firstState = false;
      for (const j of state.jobs) {
        if (!j.running) for (const d of j.devices) announced.add(j.id + ":" + d);
      }
    }
    render();
  };
  es.onerror = () => {
    $("connection").textContent =
      "Not connected to kopiru: is `kopiru gui` still running? Trying again…";
  };
}

// ---- drives -----------------------------------------------------------

function driveText(d) {
  const model = d.model || "unknown model";
  return d.path + " — " + model + ", " + bytes(d.size);
}

function partsText(d) {
  if (!d.partitions.length) return "no partitions";
  return d.partitions.map((p) => {
    let t = p.path.replace("/dev/", "") + " " + bytes(p.size);
    if (p.label) t += " “" + p.label + "”";
    if (p.mounted_at) t += " mounted at " + p.mounted_at;
    return t;
  }).join("; ");
}

function visibleDrives() {
  const all = $("show-all").checked;
  return state.drives.filter((d) => all || d.removable);
}

function renderDrives() {
  const list = $("drive-list");
  const shown = visibleDrives();
  const paths = new Set(shown.map((d) => d.path));
  for (const p of [...ticked]) {
    const d = state.drives.find((x) => x.path === p);
    if (!paths.has(p) || !d || d.unavailable || d.busy) ticked.delete(p);
  }
  // Kept in place where they are: a focused box keeps its focus.
  for (const li of [...list.children]) {
    if (!paths.has(li.dataset.path)) li.remove();
  }
  shown.forEach((d, i) => {
    const id = "drive-" + d.path.replace(/[^a-z0-9]/gi, "_");
    let li = list.querySelector(`li[data-path="${CSS.escape(d.path)}"]`);
    if (!li) {
      const box = el("input", { type: "checkbox", id: id });
      box.addEventListener("change", () => {
        if (box.checked) ticked.add(d.path); else ticked.delete(d.path);
        suggestBackupName();
      });
      // The reason is in the box's name (heard once, with it) and shown
      // below it (for the eyes only).
      li = el("li", {},
        el("label", { for: id }, box,
          el("span", {}, el("span", { class: "drive-name" }),
            el("span", { class: "drive-why-name visually-hidden" }))),
        el("p", { class: "drive-parts", id: id + "-parts" }),
        el("p", { class: "drive-why", "aria-hidden": "true" }));
      li.dataset.path = d.path;
    }
    if (list.children[i] !== li) list.insertBefore(li, list.children[i] || null);
    const box = li.querySelector("input");
    const why = d.unavailable ? "unavailable: " + d.unavailable
      : d.busy ? "busy: being written or read now" : "";
    li.querySelector(".drive-name").textContent = driveText(d);
    li.querySelector(".drive-why-name").textContent = why ? " (" + why + ")" : "";
    li.querySelector(".drive-parts").textContent = "Partitions: " + partsText(d);
    const whyEl = li.querySelector(".drive-why");
    whyEl.textContent = why;
    whyEl.hidden = !why;
    box.disabled = !!why;
    box.checked = ticked.has(d.path);
    box.setAttribute("aria-describedby", id + "-parts");
    li.className = why ? "unavailable" : "";
  });
  let none = "";
  if (!state.drives_listed) none = "Drives cannot be listed on this system yet.";
  else if (!shown.length && state.drives.length) none = "No removable drive: plug in a card or a stick, or switch on “Show all drives”.";
  else if (!shown.length) none = "No drive to write: plug in a card or a stick.";
  $("no-drives").textContent = none;
}

// ---- jobs -------------------------------------------------------------

function cardState(job, path) {
  // What became of one device: null while running.
  if (job.refused) return { ok: false, text: "nothing written: " + job.refused };
  const r = job.result;
  if (!r) return job.running ? null : { ok: false, text: "the helper stopped without a result" };
  const s = r.summary;
  if (job.kind === "backup") {
    if (s.cancelled) return { ok: false, text: "cancelled: no backup written" };
    if (r.exit_code === 0) {
      return { ok: true, text: "backed up into " + s.output + " (" + bytes(s.output_bytes) + "), verified; SHA-256 " + s.sha256 };
    }
    return { ok: false, text: "failed: " + (r.messages.join("; ") || "exit " + r.exit_code) };
  }
  const dev = (s.devices || []).find((x) => x.path === path) || {};
  const said = (r.devices || []).find((x) => x.path === path) || {};
  if (s.cancelled) {
    return {
      ok: false,
      text: dev.first_mib_written
        ? "cancelled while verifying: written, not verified"
        : "cancelled: not completely written (its first MiB is as it was): flash it again",
    };
  }
  if (s.source_error) return { ok: false, text: "failed: " + (r.messages[0] || "the image could not be read") + (said.partly_written ? "; " + said.partly_written : "") };
  if (dev.error || dev.verified === false) return { ok: false, text: "failed: " + (said.message || "error") + (said.partly_written ? "; " + said.partly_written : "") };
  if (dev.verified) return { ok: true, text: "written and verified; safe to remove" };
  return { ok: true, text: "written (not verified); safe to remove" };
}

function percent(job) {
  if (job.phase === "verifying") {
    return job.verify_total ? Math.floor(100 * job.verified / job.verify_total) : 0;
  }
  if (!job.total) return null;
  return Math.min(100, Math.floor(100 * job.done / job.total));
}

function phaseText(job) {
  const verb = { starting: "Asking for permission", checking: "Checking",
    hashing: "Checking the SHA-256", writing: "Writing", reading: "Reading",
    verifying: "Verifying", done: "Done" }[job.phase] || job.phase;
  if (!job.running) return verb;
  let t = verb;
  if (job.phase === "verifying") {
    t += ": " + bytes(job.verified) + " of " + bytes(job.verify_total) + " at " + rate(job.verify_rate);
  } else if (["writing", "reading", "hashing"].includes(job.phase)) {
    t += ": " + bytes(job.done) + (job.total ? " of " + bytes(job.total) : "") + " at " + rate(job.rate);
  }
  if (job.eta !== null && job.eta !== undefined) t += ", about " + duration(job.eta) + " left";
  const d = job.download;
  if (d && job.phase !== "verifying") {
    t += "; downloaded " + bytes(d.received) + (d.total ? " of " + bytes(d.total) : "") + " at " + rate(d.rate);
    if (d.reconnecting) t += ", reconnecting (" + d.reconnecting[0] + " of " + d.reconnecting[1] + ")";
    if (d.resumes) t += ", " + d.resumes + (d.resumes === 1 ? " resume" : " resumes");
  }
  if (job.cancel_asked) t += " (cancelling…)";
  return t;
}

function renderJob(job) {
  let box = $("job-" + job.id);
  if (!box) {
    const cancel = el("button", { type: "button", class: "cancel", text: "Cancel" });
    cancel.addEventListener("click", () => cancelJob(job.id, cancel));
    box = el("article", { class: "job", id: "job-" + job.id, "aria-labelledby": "job-" + job.id + "-title" },
      el("h3", { id: "job-" + job.id + "-title" }),
      el("div", { class: "cards" }),
      el("div", { class: "row" }, cancel));
    $("jobs").prepend(box);
  }
  const what = job.kind === "flash" ? "Flash " + job.source : "Back up into " + job.source;
  box.querySelector("h3").textContent = what;
  const cancel = box.querySelector("button.cancel");
  cancel.hidden = !job.running;
  const cards = box.querySelector(".cards");
  job.devices.forEach((path, i) => {
    const id = "job-" + job.id + "-card-" + i;
    let card = $(id);
    if (!card) {
      card = el("div", { class: "card", id: id },
        el("h4", { id: id + "-name" }),
        el("div", { class: "bar", role: "progressbar", "aria-valuemin": "0", "aria-valuemax": "100",
          "aria-labelledby": id + "-name" }, el("div", { class: "fill" })),
        el("p", { class: "detail" }),
        el("p", { class: "outcome" }));
      cards.append(card);
    }
    const t = (job.targets || []).find((x) => x.path === path);
    card.querySelector("h4").textContent = path + (t ? " — " + (t.model || "unknown model") + ", " + bytes(t.size) : "");
    const bar = card.querySelector(".bar");
    const end = cardState(job, path);
    let p = percent(job);
    if (end) p = end.ok ? 100 : p;
    if (p === null) {
      bar.removeAttribute("aria-valuenow");
      bar.setAttribute("aria-valuetext", phaseText(job));
    } else {
      bar.setAttribute("aria-valuenow", String(p));
      bar.setAttribute("aria-valuetext", p + "%, " + phaseText(job));
    }
    bar.querySelector(".fill").style.width = (p === null ? 0 : p) + "%";
    bar.classList.toggle("verify", job.phase === "verifying");
    bar.classList.toggle("failed", !!(end && !end.ok));
    bar.classList.toggle("ok", !!(end && end.ok));
    card.querySelector(".detail").textContent = end ? "" : phaseText(job);
    const out = card.querySelector(".outcome");
    out.textContent = end ? (end.ok ? "✓ " : "✗ ") + end.text : "";
    out.className = "outcome" + (end ? (end.ok ? " good" : " bad") : "");
    if (end && !announced.has(job.id + ":" + path)) {
      announced.add(job.id + ":" + path);
      announce(path + ": " + end.text, end.ok);
    }
  });
  // The image's own SHA-256, once verified, against the OS list's.
  const r = job.result;
  if (r && r.summary && r.summary.sha256 && job.kind === "flash" && !box.querySelector(".sha")) {
    let t = "SHA-256 of the written image (decompressed): " + r.summary.sha256;
    if (job.expected_sha) {
      t += job.expected_sha === r.summary.sha256 ? " (as the OS list gives it)" : " — NOT the OS list's " + job.expected_sha;
    }
    cards.append(el("p", { class: "sha", text: t }));
  }
}

function announce(text, ok) {
  const log = $("results");
  const hint = log.querySelector("p.hint");
  if (hint) hint.remove();
  log.append(el("p", { class: ok ? "good" : "bad", text: text }));
}

const expectedShaByJob = new Map();

function renderJobs() {
  $("progress").hidden = state.jobs.length === 0;
  const announced = state.jobs.find((j) => j.id === announcedJob);
  if (announced && !announced.running) say("action-message", "");
  for (const job of state.jobs) {
    job.expected_sha = expectedShaByJob.get(job.id) || null;
    renderJob(job);
  }
}

async function cancelJob(id, button) {
  button.disabled = true;
  try {
    await post("/api/cancel", { job: id });
  } catch (e) {
    say("action-message", "Cancel: " + e.message, "error");
  }
  button.disabled = false;
}

// ---- actions ----------------------------------------------------------

function chosen() {
  return visibleDrives().filter((d) => ticked.has(d.path) && !d.unavailable && !d.busy);
}

function flashClicked() {
  const image = $("image").value.trim();
  const drives = chosen();
  if (!image) { say("action-message", "Give the image first (a file or a URL).", "error"); $("image").focus(); return; }
  if (!drives.length) { say("action-message", "Tick at least one drive.", "error"); return; }
  const sha = $("sha256").value.trim();
  if (sha && !/^[0-9a-fA-F]{64}$/.test(sha)) {
    say("action-message", "A SHA-256 is 64 hexadecimal digits.", "error"); $("sha256").focus(); return;
  }
  say("action-message", "");
  const text = $("confirm-text");
  text.replaceChildren(
    el("p", { text: "Everything on " + (drives.length === 1 ? "this drive" : "these " + drives.length + " drives") + " will be overwritten with " + image + ":" }),
    el("ul", {}, ...drives.map((d) => el("li", { text: driveText(d) }))));
  $("confirm").dataset.devices = JSON.stringify(drives.map((d) => d.path));
  $("confirm").showModal();
  $("confirm-no").focus();
}

async function confirmed() {
  const dialog = $("confirm");
  const devices = JSON.parse(dialog.dataset.devices || "[]");
  dialog.close();
  try {
    const r = await post("/api/flash", {
      image: $("image").value.trim(),
      sha256: $("sha256").value.trim(),
      devices: devices,
    });
    if (expectedImageSha && $("image").value.trim() === (catalogItems.chosen || "")) {
      expectedShaByJob.set(r.job, expectedImageSha);
    }
    say("action-message", "Flashing " + devices.join(", ") + ": see the progress below.", "good");
    announcedJob = r.job;
  } catch (e) {
    say("action-message", "Not started: " + e.message, "error");
  }
}

function suggestBackupName() {
  if (backupNameEdited) return;
  const drives = chosen();
  if (drives.length !== 1) return;
  const d = drives[0];
  const name = d.bus === "loop" || !d.model ? d.path.replace("/dev/", "") : d.model;
  const base = name.replace(/[^A-Za-z0-9._-]+/g, "-").replace(/^-+|-+$/g, "").slice(0, 40) || "card";
  const day = new Date().toISOString().slice(0, 10);
  $("backup-to").value = "~/" + base + "-" + day + $("backup-format").value;
}

function formatChanged() {
  const f = $("backup-format").value;
  const v = $("backup-to").value.trim();
  if (v) $("backup-to").value = v.replace(/(\.img)?\.(zst|xz)$/, "") + f;
}

async function backupClicked() {
  const drives = chosen();
  if (drives.length !== 1) { say("action-message", "Tick exactly one drive to back up.", "error"); return; }
  if (!$("backup-to").value.trim()) suggestBackupName();
  try {
    const r = await post("/api/backup", { device: drives[0].path, output: $("backup-to").value.trim() });
    say("action-message", "Backing up " + drives[0].path + ": see the progress below.", "good");
    announcedJob = r.job;
  } catch (e) {
    say("action-message", "Not started: " + e.message, "error");
  }
}

async function readSums() {
  try {
    const r = await post("/api/sha256sums", { source: $("sums").value.trim(), image: $("image").value.trim() });
    $("sha256").value = r.sha256;
    say("image-message", "SHA-256 read from " + r.source + ".", "good");
  } catch (e) {
    say("image-message", e.message, "error");
  }
}

async function loadCatalog() {
  try {
    const r = await post("/api/catalog", { source: $("catalog").value.trim() });
    catalogItems = r.items;
    const sel = $("os");
    sel.replaceChildren(el("option", { value: "", text: "Choose one of " + r.items.length + "…" }),
      ...r.items.map((it, i) => el("option", { value: String(i), text: it.name + (it.release_date ? " (" + it.release_date + ")" : "") })));
    $("os-row").hidden = false;
    say("image-message", r.items.length + " images in the list.", "good");
    sel.focus();
  } catch (e) {
    say("image-message", e.message, "error");
  }
}

function osChosen() {
  const it = catalogItems[Number($("os").value)];
  if (!it || $("os").value === "") return;
  $("image").value = it.url;
  $("sha256").value = it.image_download_sha256 || "";
  catalogItems.chosen = it.url;
  expectedImageSha = it.extract_sha256 || null;
  say("image-message", it.name + (it.description ? ": " + it.description : ""), "good");
}

// ---- the file chooser -------------------------------------------------

async function browse(dir) {
  const list = $("chooser-list");
  try {
    const r = await fetch("/api/browse?dir=" + encodeURIComponent(dir || ""), { credentials: "same-origin" });
    const v = await r.json();
    if (!r.ok) throw new Error(v.error || r.statusText);
    $("chooser-dir").textContent = v.dir;
    say("chooser-message", "");
    const items = [];
    if (v.parent) items.push({ name: "..", label: "Up: " + v.parent, dir: true, path: v.parent });
    for (const e of v.entries) {
      const path = (v.dir.endsWith("/") ? v.dir : v.dir + "/") + e.name;
      items.push({ name: e.name, label: e.dir ? e.name + "/" : e.name, dir: e.dir, size: e.size, path: path });
    }
    list.replaceChildren(...items.map((it) => {
      const b = el("button", { type: "button" }, el("span", { text: it.label }),
        it.dir ? null : el("span", { class: "size", text: bytes(it.size) }));
      b.addEventListener("click", () => {
        if (it.dir) browse(it.path);
        else { $("image").value = it.path; $("chooser").close(); $("image").focus(); }
      });
      return el("li", {}, b);
    }));
    const first = list.querySelector("button");
    if (first) first.focus();
  } catch (e) {
    say("chooser-message", e.message, "error");
  }
}

function openChooser() {
  const v = $("image").value.trim();
  let dir = "";
  if (v && !/^https?:/.test(v) && v.includes("/")) dir = v.slice(0, v.lastIndexOf("/")) || "/";
  $("chooser").showModal();
  browse(dir);
}

// ---- start --------------------------------------------------------------

function render() {
  renderDrives();
  renderJobs();
  if (!$("backup-to").value) suggestBackupName();
}

document.addEventListener("DOMContentLoaded", () => {
  $("show-all").addEventListener("change", renderDrives);
  $("flash").addEventListener("click", flashClicked);
  $("confirm-yes").addEventListener("click", confirmed);
  $("confirm-no").addEventListener("click", () => $("confirm").close());
  $("backup").addEventListener("click", backupClicked);
  $("backup-to").addEventListener("input", () => { backupNameEdited = true; });
  $("backup-format").addEventListener("change", formatChanged);
  $("read-sums").addEventListener("click", readSums);
  $("load-catalog").addEventListener("click", loadCatalog);
  $("os").addEventListener("change", osChosen);
  $("browse").addEventListener("click", openChooser);
  $("chooser-close").addEventListener("click", () => $("chooser").close());
  connect();
});
