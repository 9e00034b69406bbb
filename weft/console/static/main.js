// The console's entry point: sign-in, loading, the live feed and the views.

import { Api } from "./api.js";
import { h, replace } from "./dom.js";
import { Live } from "./live.js";
import { Store } from "./store.js";
import { fleetView } from "./views/fleet.js";
import { leasesView } from "./views/leases.js";
import { queuesView } from "./views/queues.js";
import { questionsView } from "./views/questions.js";
import { targetsView } from "./views/targets.js";
import { workItemView, workView } from "./views/work.js";

const TOKEN_KEY = "loom.console.token";
const VIEWS = {
  fleet: ["Fleet", fleetView],
  work: ["Work", workView],
  queues: ["Queues and DLQ", queuesView],
  targets: ["Targets and spin-ups", targetsView],
  questions: ["Questions", questionsView],
  leases: ["Leases", leasesView],
};
const AGENT_REFRESH_MS = 15000; // heartbeats are not events: re-read the registry now and then
const CLOCK_MS = 5000; // "12 s ago" moves on

const $ = (id) => document.getElementById(id);
// ?project=<id> shows another project than Weft's default (the X-Loom-Project header)
const PROJECT = new URLSearchParams(location.search).get("project") || null;

function showLogin(message) {
  $("nav").hidden = true;
  $("signout").hidden = true;
  $("project").hidden = true;
  $("project-choice").hidden = true;
  replace($("view"));
  $("live").textContent = "signed out";
  $("live").className = "live";
  $("login").hidden = false;
  $("login-error").textContent = message || "";
  $("token").value = "";
  $("token").focus();
}

/** What the fleet view paints from, asked for at once: the registry and the targets. The
 * registry's answer is also the token check (a refused token: 401, nothing shown). */
function opening(api) {
  return Promise.all([api.all("/api/agents"), api.all("/api/targets")]);
}

async function boot() {
  const saved = sessionStorage.getItem(TOKEN_KEY);
  const api = new Api(saved, PROJECT);
  try {
    start(api, await opening(api), false);
  } catch (error) {
    if (error.status === 401) {
      sessionStorage.removeItem(TOKEN_KEY);
      showLogin(saved ? "The saved token is no longer accepted. Sign in again." : "");
    } else {
      fatal(error);
    }
  }
}

function fatal(error) {
  $("fatal").hidden = false;
  $("fatal").textContent = `The console cannot load: ${error.message}`;
  $("live").textContent = "not connected";
  $("live").className = "live off";
}

$("login-form").addEventListener("submit", async (event) => {
  event.preventDefault();
  const token = $("token").value.trim();
  $("token").value = "";
  if (!token) return;
  const api = new Api(token, PROJECT);
  $("login-error").textContent = "";
  try {
    const first = await opening(api);
    sessionStorage.setItem(TOKEN_KEY, token);
    start(api, first, true);
  } catch (error) {
    $("login-error").textContent =
      error.status === 401 ? "That token was not accepted. Check it and try again." : `Sign-in failed: ${error.message}`;
    $("token").focus();
  }
});

// the views live in the hash, so the skip link moves the focus itself
document.querySelector(".skip").addEventListener("click", (event) => {
  event.preventDefault();
  $("main").focus();
});

$("signout").addEventListener("click", () => {
  sessionStorage.removeItem(TOKEN_KEY);
  location.hash = "";
  location.reload();
});

function start(api, first, signedIn = false) {
  const store = new Store();
  const announce = (text) => {
    $("announce").textContent = text;
  };
  $("login").hidden = true;
  $("nav").hidden = false;
  $("signout").hidden = !api.token;
  // other projects on this NATS account: a choice in the header when there are some
  const chooseProject = (current) => {
    api.get("/api/stats/projects").then(({ projects }) => {
      if (stopped || projects.length < 2) return;
      const select = $("project-select");
      select.replaceChildren(...projects.map((p) => h("option", { value: p.project_id }, p.default ? `${p.project_id} (default)` : p.project_id)));
      select.value = current;
      select.onchange = () => {
        const query = new URLSearchParams(location.search);
        query.set("project", select.value);
        location.search = query.toString(); // a new page: a new store, a new feed
      };
      $("project").hidden = true;
      $("project-choice").hidden = false;
    }).catch(() => {});
  };
  let projectShown = false;
  const showStats = (stats) => {
    if (!projectShown) {
      projectShown = true;
      chooseProject(stats.project_id);
    }
    $("project").hidden = !$("project-choice").hidden;
    $("project").textContent = `project ${stats.project_id}`;
    store.setStats(stats);
  };
  let stopped = false;
  const timers = [];
  // a token that stops being accepted ends this session: timers, feed and views stop
  api.onUnauthorized = () => {
    if (stopped) return;
    stopped = true;
    timers.forEach(clearInterval);
    live.close();
    window.removeEventListener("hashchange", route);
    if (current && current.destroy) current.destroy();
    current = null;
    sessionStorage.removeItem(TOKEN_KEY);
    showLogin("The token is no longer accepted. Sign in again.");
  };

  let opened = first;
  const loadAll = async () => {
    // agents and targets first: the fleet view needs them; then the counts and the (larger)
    // work records, once the fleet has been drawn (they must not hold up the first paint)
    if (opened) {
      const [agents, targets] = opened;
      opened = null;
      store.setTargets(targets);
      store.setAgents(agents);
    } else {
      await Promise.all([
        readWhole("agents", "/api/agents", (items, read) => store.setAgents(items, read)),
        readWhole("targets", "/api/targets", (items, read) => store.setTargets(items, read)),
      ]);
    }
    await new Promise((done) => requestAnimationFrame(() => setTimeout(done, 0)));
    await Promise.all([
      refreshProtocolAgents(),
      api.get("/api/stats").then(showStats),
      readWhole("questions", "/api/questions", (items, read) => store.setQuestions(items, read)),
      api.all("/api/work", {}, (page) => store.addWork(page)).then(() => {
        if (!store.loaded.work) performance.mark("loom:work-loaded"); // the perf suite reads it
        store.loaded.work = true;
        store.changed("work");
      }),
    ]);
  };
  const reload = () =>
    loadAll().catch((error) => {
      if (error.status !== 401) announce(`Reading the project failed: ${error.message}`);
    });

  const live = new Live({
    token: api.token,
    project: api.project,
    onEvent: (event) => store.apply(event),
    onStats: showStats,
    onOpen: () => {
      $("live").textContent = "live";
      $("live").className = "live on";
      // after reconnecting (or skipped events): read everything again; on the first connect,
      // the registry and the targets (read before the feed was open: changes in between)
      if (connected) reload();
      else {
        refreshAgents();
        readWhole("targets", "/api/targets", (items, read) => store.setTargets(items, read)).catch(() => {});
      }
      connected = true;
    },
    onClose: () => {
      $("live").textContent = "reconnecting…";
      $("live").className = "live off";
    },
    onRefused: () => announce("Live updates were refused; the console shows what it last read."),
  });
  let connected = false;
  /** Read a whole collection; what events said meanwhile is applied over the answer. */
  function readWhole(collection, path, set) {
    const read = store.beginRead(collection);
    return api.all(path).then(
      (items) => set(items, read),
      (error) => {
        store.endRead(read);
        throw error;
      },
    );
  }
  function refreshAgents() {
    readWhole("agents", "/api/agents", (items, read) => store.setAgents(items, read)).catch(() => {});
    refreshProtocolAgents().catch(() => {});
  }
  function refreshProtocolAgents() {
    return api.get("/api/agents/protocol").then((found) => store.setProtocolAgents(found.items));
  }
  live.open();
  reload();
  timers.push(
    setInterval(refreshAgents, AGENT_REFRESH_MS),
    setInterval(() => store.changed("stats"), CLOCK_MS),
  );

  let current = null;
  const ctx = {
    api,
    store,
    announce,
    /** Run an action; say what happened, show a refusal where the operator looks. */
    async act(action, done) {
      const notice = $("view").querySelector(".view-error");
      if (notice) notice.textContent = "";
      try {
        const result = await action();
        announce(done);
        return result;
      } catch (error) {
        if (notice) notice.textContent = error.message;
        announce(error.message);
        return null;
      }
    },
  };

  function route() {
    const [name, arg] = location.hash.replace(/^#/, "").split("/");
    const key = VIEWS[name] ? name : "fleet";
    for (const link of document.querySelectorAll("nav a")) {
      if (link.getAttribute("href") === `#${key}`) link.setAttribute("aria-current", "page");
      else link.removeAttribute("aria-current");
    }
    if (current && current.destroy) current.destroy();
    const [title, make] = VIEWS[key];
    current = key === "work" && arg ? workItemView(ctx, arg) : make(ctx);
    const heading = h("h2", { tabindex: "-1" }, current.title || title);
    replace($("view"), h("section", { "aria-labelledby": "view-title", id: `view-${key}` }, heading, h("p", { class: "error view-error", role: "alert" }), current.el));
    heading.id = "view-title";
    document.title = `${current.title || title} · Loom console`;
    current.update();
    if (routed) heading.focus(); // after signing in, and on every move between views
    routed = true;
  }
  let routed = signedIn;
  store.subscribe(() => current && current.update());
  window.addEventListener("hashchange", route);
  route();
}

boot();
