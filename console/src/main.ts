/**
 * The run console: sign in as yourself with a personal API key or your identity provider's token
 * (a workspace key works too; kept in sessionStorage: this tab only), then hash routes #/runs,
 * #/runs/<runId>, #/decisions. Talks only to the REST API.
 */
import { Api, ApiError } from "./api.js";
import type { Ctx, View } from "./context.js";
import { h, replace, uid } from "./dom.js";
import { actorName } from "./model/decisions.js";
import { startInboxWatch, type InboxWatch } from "./inbox-watch.js";
import { decisionsView } from "./views/decisions.js";
import { runView } from "./views/run.js";
import { runsView } from "./views/runs.js";

const KEY_ITEM = "toolchain.console.key";
const root = document.getElementById("app")!;
const toast = h("div", { class: "toast", role: "status", "aria-live": "polite", "data-testid": "toast" });
let dispose: (() => void) | undefined;
let ctx: Ctx | undefined;
let watch: InboxWatch | undefined;
let toastTimer: ReturnType<typeof setTimeout> | undefined;
const TOAST_MS = 6_000;

function signOut(message?: string): void {
  sessionStorage.removeItem(KEY_ITEM);
  ctx = undefined;
  dispose?.();
  dispose = undefined;
  watch?.stop();
  watch = undefined;
  showSignIn(message);
}

/** Toasts go away by themselves (errors stay longer) and on a click. */
function notify(message: string, tone: "ok" | "error" = "ok"): void {
  toast.textContent = message;
  toast.setAttribute("data-tone", tone);
  toast.hidden = false;
  clearTimeout(toastTimer);
  toastTimer = setTimeout(clearToast, tone === "error" ? TOAST_MS * 2 : TOAST_MS);
}
function clearToast(): void {
  clearTimeout(toastTimer);
  toast.textContent = "";
  toast.hidden = true;
}
toast.hidden = true;
toast.addEventListener("click", clearToast);

function showSignIn(message?: string): void {
  const inputId = uid("key");
  const input = h("input", {
    id: inputId,
    type: "password",
    autocomplete: "off",
    required: true,
    spellcheck: "false",
    "data-testid": "api-key",
  });
  const error = h("p", { class: "form-error", role: "alert" }, message ?? "");
  const button = h("button", { type: "submit", class: "btn primary" }, "Sign in");
  const form = h(
    "form",
    { class: "signin", "aria-labelledby": "signin-h" },
    h("h1", { id: "signin-h" }, "Toolchain console"),
    h(
      "p",
      {},
      "Sign in as yourself with your personal API key or the sign-in token from your identity provider. It is kept for this browser tab only.",
    ),
    h("div", { class: "field" }, h("label", { for: inputId }, "API key or sign-in token"), input),
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
      await start(key);
    } catch (err) {
      error.textContent =
        err instanceof ApiError && err.status === 401
          ? "This key or token is unknown, revoked or expired."
          : `Could not sign in: ${(err as Error).message}`;
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
const countBadge = h("span", { class: "count", "data-testid": "pending-count", hidden: true });
navLinks.decisions.append(countBadge);

async function start(key: string): Promise<void> {
  const api = new Api(key, () => signOut("Your key was refused (revoked or expired?). Sign in again."));
  const me = await api.me().catch(() => undefined);
  ctx = { api, ...(me ? { me } : {}), notify, pendingChanged: () => watch?.refresh() };
  const who = me
    ? h(
        "span",
        { class: "who small", "data-testid": "signed-in-as" },
        me.actor.kind === "user" ? actorName(me.actor) : `service key ${me.actor.id}`,
        me.roles?.length ? ` · ${me.roles.join(", ")}` : "",
      )
    : null;
  watch?.stop();
  watch = startInboxWatch(api, me, (n) => {
    countBadge.hidden = n === 0;
    replace(countBadge, String(n), h("span", { class: "sr-only" }, " waiting"));
    document.title = document.title.replace(/^\(\d+\) /, "");
    if (n) document.title = `(${n}) ${document.title}`;
  });
  replace(
    root,
    h(
      "a",
      {
        class: "skip",
        href: "#main",
        onclick: (e: Event) => {
          e.preventDefault();
          content.focus();
        },
      },
      "Skip to content",
    ),
    h(
      "header",
      { class: "top" },
      h("strong", { class: "brand" }, "Toolchain console"),
      h("nav", { "aria-label": "Main" }, navLinks.runs, navLinks.decisions),
      who,
      watch.notifyToggle,
      h("button", { type: "button", class: "btn subtle", onclick: () => signOut() }, "Sign out"),
    ),
    content,
    toast,
  );
  route(false);
}

function route(moveFocus = true): void {
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
  const n = countBadge.hidden ? "" : `(${countBadge.firstChild?.textContent ?? ""}) `;
  document.title = `${n}${m ? "Run" : current === "decisions" ? "Decisions" : "Runs"} · Toolchain console`;
  // a page change moves focus to its heading (not to the body)
  if (moveFocus) {
    const h1 = content.querySelector("h1");
    if (h1) {
      h1.setAttribute("tabindex", "-1");
      h1.focus();
    } else content.focus();
  }
}

window.addEventListener("hashchange", () => {
  if (location.hash === "#main") return;
  route();
});
const saved = sessionStorage.getItem(KEY_ITEM);
if (saved) void start(saved);
else showSignIn();
