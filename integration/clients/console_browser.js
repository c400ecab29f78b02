// The console walk in headless Chromium (puppeteer-core, the machine's
// /usr/bin/chromium): every step clicks a link or a button the way a
// person would, and reports what the page showed. Dialogs, console
// errors, page errors and CSP violations are recorded for the whole run.
// Input: the JSON in argv[2]; output: one JSON document on stdout.
const puppeteer = require("puppeteer-core");
const fs = require("fs");
const path = require("path");

const cfg = JSON.parse(process.argv[2]);
const out = { steps: {}, dialogs: [], consoleErrors: [], pageErrors: [], screenshots: [] };

async function main() {
  const browser = await puppeteer.launch({
    executablePath: cfg.chromium, headless: true, userDataDir: cfg.profile,
    args: ["--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run", "--disable-background-networking",
      "--disable-component-update", "--disable-sync"],
  });
  try {
    const page = await browser.newPage();
    await page.setViewport({ width: 1200, height: 900 });
    page.setDefaultTimeout(15000);
    page.on("dialog", async (d) => { out.dialogs.push(d.type() + ": " + d.message()); await d.dismiss(); });
    page.on("console", (m) => { if (m.type() === "error") out.consoleErrors.push(m.text()); });
    page.on("pageerror", (e) => out.pageErrors.push(String(e)));
    out.failedResponses = [];
    page.on("response", (r) => { if (r.status() >= 400) out.failedResponses.push(r.status() + " " + r.url()); });
    const cdp = await page.createCDPSession();
    await cdp.send("Browser.setDownloadBehavior", { behavior: "allow", downloadPath: cfg.downloads, eventsEnabled: true });

    const shot = async (name) => {
      const p = path.join(cfg.shots, name + ".png");
      await page.screenshot({ path: p, fullPage: true });
      out.screenshots.push(p);
    };
    const click = async (sel) => {
      await Promise.all([page.waitForNavigation({ waitUntil: "load" }), page.click(sel)]);
    };
    const clickText = async (sel, text) => {
      const handles = await page.$$(sel);
      for (const h of handles) {
        if ((await h.evaluate((e) => e.textContent)) === text) {
          await Promise.all([page.waitForNavigation({ waitUntil: "load" }), h.click()]);
          return;
        }
      }
      throw new Error("no " + sel + " with text " + JSON.stringify(text) + " on " + page.url());
    };
    const text = (sel) => page.$eval(sel, (e) => e.textContent);
    const texts = (sel) => page.$$eval(sel, (es) => es.map((e) => e.textContent));
    const step = async (name, f) => {
      try { out.steps[name] = await f(); } catch (e) { out.steps[name] = { error: String(e && e.stack || e) }; }
    };

    // --- Anonymous server.
    const A = cfg.anon;
    await step("buckets", async () => {
      await page.goto(A + "/-/console/", { waitUntil: "load" });
      await shot("buckets");
      return { buckets: await texts("a.bucket") };
    });
    await step("folder", async () => {
      await clickText("a.bucket", "console");
      await clickText("a.folder", "data/");
      await shot("browse");
      return { url: page.url(), files: await texts("a.file"), crumbs: await texts(".crumbs a") };
    });
    await step("csv", async () => {
      await clickText("a.file", "vessels.csv");
      await shot("csv");
      return { rows: await page.$$eval("#preview-table tr", (trs) => trs.map((tr) => Array.from(tr.children, (c) => c.textContent))) };
    });
    await step("image", async () => {
      await page.goBack({ waitUntil: "load" });
      await clickText("a.file", "chart.png");
      await page.waitForFunction(() => { const i = document.getElementById("preview-image"); return i && i.complete; });
      await shot("image");
      return await page.$eval("#preview-image", (i) => ({ naturalWidth: i.naturalWidth, naturalHeight: i.naturalHeight, width: i.width, height: i.height }));
    });
    await step("download", async () => {
      const done = new Promise((resolve, reject) => {
        cdp.on("Browser.downloadProgress", (e) => {
          if (e.state === "completed") resolve(e);
          if (e.state === "canceled") reject(new Error("download canceled"));
        });
      });
      let name = "";
      cdp.on("Browser.downloadWillBegin", (e) => { name = e.suggestedFilename; });
      await page.click("#download");
      await done;
      return { file: path.join(cfg.downloads, name), name };
    });
    await step("text", async () => {
      await page.goto(A + "/-/console/", { waitUntil: "load" });
      await clickText("a.bucket", "console");
      await clickText("a.file", "README.txt");
      await shot("file");
      const t = await text("#preview-text");
      return { firstLine: t.split("\n")[0], facts: await text("#facts"), snippets: await texts("pre.snippet") };
    });
    for (const [name, label] of [["hostileName", cfg.hostile], ["html", "evil.html"], ["svg", "evil.svg"]]) {
      await step(name, async () => {
        await page.goto(A + "/-/console/", { waitUntil: "load" });
        await clickText("a.bucket", "console");
        const listed = (await texts("a.file")).includes(label);
        await clickText("a.file", label);
        if (name === "hostileName") await shot("hostile");
        return { listed, preview: await text("#preview-text"), title: await page.title(),
          images: await page.$$eval("img", (is) => is.length), scripts: await page.$$eval("script", (s) => s.length) };
      });
    }
    await step("versions", async () => {
      await page.goto(A + "/-/console/", { waitUntil: "load" });
      await clickText("a.bucket", "chain");
      await clickText("a.file", "notes.txt");
      const latest = await text("#preview-text");
      const versions = await texts("a.version");
      await shot("versions");
      await clickText("a.version", cfg.oldVersion);
      return { latest, versions, old: await text("#preview-text") };
    });
    await step("million", async () => {
      await page.goto(A + "/-/console/", { waitUntil: "load" });
      const t0 = Date.now();
      await clickText("a.bucket", "million");
      const firstMs = Date.now() - t0;
      const first = await texts("a.file");
      await shot("million");
      const t1 = Date.now();
      await click("#next-page");
      const nextMs = Date.now() - t1;
      const nav = await page.evaluate(() => { const n = performance.getEntriesByType("navigation")[0]; return n.responseEnd - n.requestStart; });
      return { firstMs, nextMs, responseMs: nav, first: [first[0], first[first.length - 1], first.length], next: (await texts("a.file"))[0] };
    });

    // The archive's HTML and SVG opened as S3 objects, on the console's
    // origin, in a page of their own (its dialogs and console lines are
    // kept apart): they must be sandboxed, their script never run.
    await step("objects", async () => {
      const p = await browser.newPage();
      const seen = { dialogs: [], consoleErrors: [] };
      p.on("dialog", async (d) => { seen.dialogs.push(d.type() + ": " + d.message()); await d.dismiss(); });
      p.on("console", (m) => { if (m.type() === "error") seen.consoleErrors.push(m.text()); });
      const origins = {};
      for (const k of ["evil.html", "evil.svg"]) {
        const resp = await p.goto(A + "/console/" + k, { waitUntil: "load" });
        await new Promise((r) => setTimeout(r, 300));
        origins[k] = { status: resp.status(), type: resp.headers()["content-type"], csp: resp.headers()["content-security-policy"] || "",
          origin: await p.evaluate(() => self.origin) };
      }
      await p.close();
      return { origins, dialogs: seen.dialogs, consoleErrors: seen.consoleErrors };
    });

    // --- Keyed server, restores allowed.
    const K = cfg.keyed;
    await step("badLogin", async () => {
      await page.goto(K + "/-/console/", { waitUntil: "load" });
      const redirected = page.url();
      await page.type("#access_key", cfg.ak);
      await page.type("#secret_key", "not-the-secret");
      await click("#login-submit");
      await shot("login-failed");
      return { redirected, message: await text("#error"), cookies: (await page.cookies()).map((c) => c.name) };
    });
    await step("goodLogin", async () => {
      await page.type("#access_key", cfg.ak);
      await page.type("#secret_key", cfg.sk);
      await click("#login-submit");
      const c = (await page.cookies()).find((c) => c.name === "wharf_console");
      return { url: page.url(), buckets: await texts("a.bucket"), who: await text("#who"),
        cookie: c && { httpOnly: c.httpOnly, sameSite: c.sameSite, path: c.path, session: c.session } };
    });
    await step("restore", async () => {
      await clickText("a.bucket", "cold");
      await clickText("a.file", "cold.bin");
      const before = { note: await text("#archived-note"), cost: await text("#restore-cost"), state: await text("#restore-state") };
      await shot("restore");
      await click("#restore-button");
      await shot("restoring");
      return { before, flash: await text("#flash"), state: await text("#restore-state"),
        button: (await page.$("#restore-button")) !== null };
    });
    await step("logout", async () => {
      await click("#logout");
      const after = page.url();
      await page.goto(K + "/-/console/", { waitUntil: "load" });
      return { after, then: page.url(), cookies: (await page.cookies()).map((c) => c.name) };
    });
  } finally {
    await browser.close();
  }
}

main().then(() => { process.stdout.write(JSON.stringify(out)); }, (e) => { out.fatal = String(e && e.stack || e); process.stdout.write(JSON.stringify(out)); });
