// Live pages (docs/admin.md, "Live updates"): every few seconds, fetch this page's own URL and
// swap the contents of its live regions ([data-alk-live] and a changelist's rows) in place, so
// the scroll position, the forms and <details> outside them (the search, the filters, the
// action bar) stay as they are, and carry the ticked checkboxes over. No library, nothing
// fetched from anywhere but this page's URL. Without scripts, a <noscript> meta refresh.
"use strict";
{
    const control = document.getElementById("alk-live-control");
    const every = Number(control.dataset.seconds) * 1000;
    const stateText = control.querySelector(".alk-live-state");
    const button = control.querySelector("button");
    let paused = sessionStorage.getItem("alk-live-paused") === "1";

    function regions(doc) {
        return doc.querySelectorAll("[data-alk-live], #result_list > tbody");
    }

    function key(node, index) {
        return node.id || String(index);
    }

    // Keep the operator's selection: the checkbox elements themselves, ticked or not, so that
    // Django's actions.js still counts them.
    function carryOver(old, fresh) {
        const boxes = new Map();
        old.querySelectorAll("input[type=checkbox][value]").forEach((b) => boxes.set(b.value, b));
        fresh.querySelectorAll("input[type=checkbox][value]").forEach((b) => {
            const kept = boxes.get(b.value);
            if (kept) {
                b.replaceWith(kept);
                kept.closest("tr")?.classList.toggle("selected", kept.checked);
            }
        });
    }

    // Swap every region's contents; false when the page's regions changed (an empty job
    // list that now has rows), which only a reload can show.
    function swap(doc) {
        const fresh = new Map(Array.from(regions(doc), (r, i) => [key(r, i), r]));
        const here = Array.from(regions(document));
        if (here.length !== fresh.size || here.some((r, i) => !fresh.has(key(r, i)))) {
            return false;
        }
        here.forEach((old, i) => {
            const next = fresh.get(key(old, i));
            carryOver(old, next);
            old.replaceChildren(...next.childNodes);
        });
        return true;
    }

    async function refresh() {
        if (paused || document.hidden) return;
        const response = await fetch(window.location.href, { credentials: "same-origin" });
        if (!response.ok || response.redirected) {
            // Logged out, or the page is gone: stop rather than swap in a login form.
            stateText.textContent = control.dataset.stopped;
            clearInterval(timer);
            return;
        }
        if (!swap(new DOMParser().parseFromString(await response.text(), "text/html"))) {
            window.location.reload();
            return;
        }
        stateText.textContent = control.dataset.updated + " " + new Date().toLocaleTimeString();
        document.dispatchEvent(new CustomEvent("alk:refreshed"));
    }

    function show() {
        button.textContent = paused ? control.dataset.resume : control.dataset.pause;
        button.setAttribute("aria-pressed", String(paused));
        if (paused) stateText.textContent = control.dataset.paused;
    }

    // Django's actions.js counts the checkboxes the page was loaded with: a refresh can add
    // rows, so the counter and "select all" take in every checkbox the list holds now.
    function recount() {
        const counter = document.querySelector(".action-counter");
        if (!counter || !window.interpolate) return;
        const boxes = document.querySelectorAll("tr input.action-select");
        const sel = Array.from(boxes).filter((b) => b.checked).length;
        const text = ngettext("%(sel)s of %(cnt)s selected", "%(sel)s of %(cnt)s selected", sel);
        counter.dataset.actionsIcnt = boxes.length;
        counter.textContent = interpolate(text, { sel: sel, cnt: boxes.length }, true);
    }
    document.getElementById("action-toggle")?.addEventListener("click", (event) => {
        document.querySelectorAll("tr input.action-select").forEach((b) => {
            b.checked = event.target.checked;
            b.closest("tr").classList.toggle("selected", b.checked);
        });
        recount();
    });
    document.getElementById("result_list")?.addEventListener("change", recount);
    document.addEventListener("alk:refreshed", recount);

    button.addEventListener("click", () => {
        paused = !paused;
        sessionStorage.setItem("alk-live-paused", paused ? "1" : "0");
        show();
        if (!paused) refresh();
    });
    const timer = setInterval(() => refresh().catch(() => {}), every);
    control.hidden = false;
    show();
}
