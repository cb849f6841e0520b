/**
 * The run console: sign in with a workspace API key (kept in sessionStorage: this tab only),
 * then hash routes #/runs, #/runs/<runId>, #/decisions. Talks only to the REST API.
 */
import { Api, ApiError } from "./api.js";
import type { Ctx, View } from "./context.js";
import { h, replace, uid } from "./dom.js";
import { decisionsView } from "./views/decisions.js";
import { runView } from "./views/run.js";
import { runsView } from "./views/runs.js";

const KEY_ITEM = "toolchain.console.key";
const root = document.getElementById("app")!;
const toast = h("div", { class: "toast", role: "status", "aria-live": "polite", "data-testid": "toast" });
let dispose: (() => void) | undefined;
let ctx: Ctx | undefined;

function signOut(message?: string): void {
  sessionStorage.removeItem(KEY_ITEM);
  ctx = undefined;
  dispose?.();
  dispose = undefined;
  showSignIn(message);
}

function notify(message: string, tone: "ok" | "error" = "ok"): void {
  toast.textContent = message;
  toast.setAttribute("data-tone", tone);
}

function showSignIn(message?: string): void {
  const inputId = uid("key");
  const input = h("input", { id: inputId, type: "password", autocomplete: "off", required: true, spellcheck: "false", "data-testid": "api-key" });
  const error = h("p", { class: "form-error", role: "alert" }, message ?? "");
  const button = h("button", { type: "submit", class: "btn primary" }, "Sign in");
  const form = h("form", { class: "signin", "aria-labelledby": "signin-h" },
    h("h1", { id: "signin-h" }, "Toolchain console"),
    h("p", {}, "Sign in with a workspace API key. It is kept for this browser tab only."),
    h("div", { class: "field" }, h("label", { for: inputId }, "API key"), input),
    error,
    button,
  );
  form.addEventListener("submit", async (e) => {
    e.preventDefault();
    const key = input.value.trim();
    if (!key) return;
    button.disabled = true;
    try {
      await new Api(key).skills();
      sessionStorage.setItem(KEY_ITEM, key);
      start(key);
    } catch (err) {
      error.textContent = err instanceof ApiError && err.status === 401 ? "This key is unknown or revoked." : `Could not sign in: ${(err as Error).message}`;
      button.disabled = false;
      input.focus();
    }
  });
  replace(root, h("main", { id: "main", class: "center" }, form));
  input.focus();
}

const content = h("main", { id: "main", tabindex: -1 });
const navLinks = {
  runs: h("a", { href: "#/runs" }, "Runs"),
  decisions: h("a", { href: "#/decisions" }, "Decisions"),
};

function start(key: string): void {
  ctx = { api: new Api(key, () => signOut("Your key was refused (revoked?). Sign in again.")), notify };
  replace(root,
    h("a", { class: "skip", href: "#main", onclick: (e: Event) => { e.preventDefault(); content.focus(); } }, "Skip to content"),
    h("header", { class: "top" },
      h("strong", { class: "brand" }, "Toolchain console"),
      h("nav", { "aria-label": "Main" }, navLinks.runs, navLinks.decisions),
      h("button", { type: "button", class: "btn subtle", onclick: () => signOut() }, "Sign out"),
    ),
    content,
    toast,
  );
  route();
}

function route(): void {
  if (!ctx) return;
  const path = location.hash.replace(/^#/, "").split("?")[0] || "/runs";
  let view: View;
  let current: keyof typeof navLinks | null = null;
  const m = /^\/runs\/([^/]+)$/.exec(path);
  if (m) view = runView(decodeURIComponent(m[1]!));
  else if (path === "/decisions") {
    view = decisionsView;
    current = "decisions";
  } else {
    view = runsView;
    current = "runs";
  }
  for (const [k, a] of Object.entries(navLinks)) {
    if (k === current) a.setAttribute("aria-current", "page");
    else a.removeAttribute("aria-current");
  }
  dispose?.();
  content.replaceChildren();
  dispose = view(content, ctx);
  document.title = `${m ? "Run" : current === "decisions" ? "Decisions" : "Runs"} · Toolchain console`;
}

window.addEventListener("hashchange", () => {
  if (location.hash === "#main") return;
  route();
});
const saved = sessionStorage.getItem(KEY_ITEM);
if (saved) start(saved);
else showSignIn();
