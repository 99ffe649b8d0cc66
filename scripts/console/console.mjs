// agw's console in headless Chromium (issue 40), against agw serving its bundled demo agents on the
// offline demo model. Each check prints one `ok` line and writes a screenshot to $SHOTS; a
// failure throws. Run by run.sh: AGW_BASE (auth off), AGW_AUTH_BASE and AGW_TOKEN (auth on).

import { chromium } from "playwright-core";

const base = process.env.AGW_BASE;
const shots = process.env.SHOTS;
const browser = await chromium.launch({
  executablePath: process.env.CHROMIUM || "/usr/bin/chromium",
  args: ["--no-sandbox"],
});
let passed = 0;
let step = 0;

async function check(name, page, fn) {
  await fn();
  step += 1;
  await page.screenshot({ path: `${shots}/${String(step).padStart(2, "0")}-${name.replace(/[^a-z0-9]+/gi, "-")}.png`, fullPage: true });
  passed += 1;
  console.log(`ok   console: ${name}`);
}

async function open(url = base) {
  const context = await browser.newContext({ viewport: { width: 1280, height: 900 } });
  const page = await context.newPage();
  const problems = [];
  page.on("pageerror", (e) => problems.push(e.message));
  // An answer's image on another host (the demo's are on example.com) cannot load offline;
  // anything else the page fails to load or run is a failure.
  page.on("console", (m) => {
    if (m.type() === "error" && !m.text().includes("net::ERR_NAME_NOT_RESOLVED")) problems.push(m.text());
  });
  await page.goto(`${url}/`);
  return { page, problems };
}

async function pick(page, agentKey) {
  await page.click(`[data-agent="${agentKey}"]`);
}

// Sends `text`; the run's end is the next end line after the ones shown now.
let endsBefore = 0;
async function ask(page, text) {
  endsBefore = await page.locator("[data-run-end]").count();
  await page.fill("#message", text);
  await page.click("#send");
}

// The end line (`run.complete`, `run.error`, `run.cancel`) of the run last asked for.
async function ended(page, type = "run.complete", timeout = 30_000) {
  await page.waitForFunction(
    ([before, type]) => {
      const ends = document.querySelectorAll("[data-run-end]");
      return ends.length > before && ends[ends.length - 1].dataset.runEnd === type;
    },
    [endsBefore, type],
    { timeout },
  );
}

{
  const { page, problems } = await open();
  await check("the root opens the console and lists the demo agents", page, async () => {
    if (!page.url().endsWith("/console/")) throw new Error(`at ${page.url()}`);
    await page.locator('[data-agent="demoModeReact"]').waitFor();
    const count = await page.locator("[data-agent]").count();
    if (count < 10) throw new Error(`${count} agents`);
  });

  await check("a REACT run streams reasoning, a tool card with its result, and the answer", page, async () => {
    await pick(page, "demoModeReact");
    await page.getByText("Mode REACT").waitFor();
    await ask(page, "What is the weather in Tokyo?");
    const card = page.locator('article[aria-label="Tool call mock_city_weather"]');
    await card.waitFor();
    await card.locator('pre[aria-label="Result"]', { hasText: "city" }).waitFor();
    await ended(page);
    const answer = await page.locator(".content").last().innerText();
    if (!answer.includes("mock_city_weather")) throw new Error(answer);
    const events = await page.locator("#timeline li").count();
    if (events < 10) throw new Error(`${events} events in the inspector`);
    // Each model call's tokens and the trace the console started the run in.
    await page.locator("#run-facts dt", { hasText: "call 2" }).waitFor();
    const trace = await page.locator("#run-facts dt", { hasText: "trace" }).locator("xpath=following-sibling::dd[1]").innerText();
    if (!/^[0-9a-f]{32}$/.test(trace)) throw new Error(`trace ${trace}`);
  });

  await check("a PLAN_EXECUTE run shows its plan as a checklist that completes", page, async () => {
    await pick(page, "demoModePlanExecute");
    await ask(page, "What is the weather in Tokyo and what time is it there?");
    await page.locator('section[aria-label="Plan"] li').first().waitFor();
    await ended(page, "run.complete", 60_000);
    const statuses = await page.locator('section[aria-label="Plan"] li').evaluateAll((items) => items.map((i) => i.dataset.status));
    if (!statuses.length || statuses.some((s) => s !== "completed")) throw new Error(statuses.join(","));
  });

  await check("a frontend tool shows its viewport in a sandboxed frame and goes on with what it submits", page, async () => {
    await pick(page, "demoConfirmDialog");
    await ask(page, "Should we go hiking?");
    const frame = page.frameLocator('iframe[data-viewport="confirm_dialog"]');
    await frame.getByRole("button", { name: "Yes" }).click();
    await ended(page);
    const result = await page.locator('pre[aria-label="Result"]').last().innerText();
    if (!result.includes('"selectedOption": "Yes"')) throw new Error(result);
    // The frame is an opaque origin: it cannot reach the page (or its token).
    const sandbox = await page.locator("iframe.viewport").first().getAttribute("sandbox").catch(() => "gone");
    if (sandbox !== "gone" && sandbox.includes("allow-same-origin")) throw new Error(sandbox);
  });

  await check("the same tool answered with the JSON form", page, async () => {
    await ask(page, "Should we go hiking again?");
    const form = page.locator('form[aria-label="Answer the tool"]');
    await form.waitFor({ state: "attached" });
    await page.locator("details", { hasText: "Answer as JSON" }).last().locator("summary").click();
    await form.locator("textarea").fill('{"selectedOption":"No","selectedIndex":2}');
    await form.locator("button").click();
    await ended(page);
    const result = await page.locator('pre[aria-label="Result"]').last().innerText();
    if (!result.includes('"selectedOption": "No"')) throw new Error(result);
  });

  await check("an answer's viewport block is rendered in a sandboxed frame", page, async () => {
    await pick(page, "demoViewport");
    await ask(page, "Weather in Paris?");
    await ended(page);
    // The card shows the tool's result it was handed: its temperature, in °C.
    const card = page.frameLocator('iframe[data-viewport="show_weather_card"]').locator("#card");
    await card.getByText(/°C/).waitFor();
  });

  await check("sub-agents stream in nested panels", page, async () => {
    await pick(page, "demoTeam");
    await ask(page, "What is the weather in Tokyo?");
    await ended(page, "run.complete", 60_000);
    const panels = await page.locator("section.child").count();
    if (panels < 2) throw new Error(`${panels} panels`);
    await page.locator('section.child article[aria-label="Tool call mock_city_weather"]').first().waitFor();
  });

  await check("an approval is answered with its options, and the call runs", page, async () => {
    await pick(page, "demoApprovals");
    await ask(page, "What is the weather in Paris?");
    const waiting = page.locator('article[aria-label="Waiting for you"]');
    await waiting.waitFor();
    await waiting.getByRole("button", { name: "Allow once" }).click();
    await ended(page);
    await page.locator('pre[aria-label="Result"]', { hasText: "temperatureC" }).waitFor();
  });

  await check("a paused tool's question is answered with its own buttons", page, async () => {
    await pick(page, "demoCredits");
    await ask(page, "Draw a red fox in the snow");
    const waiting = page.locator('article[aria-label="Waiting for you"]');
    await waiting.waitFor();
    await waiting.getByRole("button", { name: "Continue" }).click();
    await ended(page);
  });

  await check("interrupt stops a running run", page, async () => {
    await pick(page, "demoModeThinking");
    await ask(page, "Explain carbon in detail, with its isotopes, its chemistry and its place in life");
    await page.locator("details.reasoning").last().waitFor();
    await page.click("#interrupt");
    await ended(page, "run.cancel");
  });

  await check("a file attached from the page goes with the message", page, async () => {
    await pick(page, "demoModePlain");
    await page.setInputFiles("#files", { name: "notes.txt", mimeType: "text/plain", buffer: Buffer.from("Pack water.") });
    await ask(page, "What do my notes say?");
    await ended(page);
    await page.locator(".user .files", { hasText: "📎 notes.txt" }).waitFor();
  });

  await check("an image the demo model cannot read is refused before anything runs", page, async () => {
    const png = Buffer.from("iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNkYPhfDwAChwGA60e6kgAAAABJRU5ErkJggg==", "base64");
    await page.setInputFiles("#files", { name: "dot.png", mimeType: "image/png", buffer: png });
    await page.fill("#message", "What is in the picture?");
    await page.click("#send");
    await page.locator("#status", { hasText: "does not take images (dot.png)" }).waitFor();
    // The browser logs the refused request (HTTP 400) as an error: this one was expected.
    const expected = problems.findIndex((p) => p.includes("status of 400"));
    if (expected >= 0) problems.splice(expected, 1);
  });

  await check("structured output shows the typed answer", page, async () => {
    await pick(page, "demoStructuredOutput");
    await ask(page, "Weather in Paris?");
    await ended(page);
    const output = await page.locator('pre[aria-label="Structured output"]').last().innerText();
    if (!JSON.parse(output).city) throw new Error(output);
  });

  await check("a reload re-attaches to the running run, below the chat's earlier runs", page, async () => {
    await pick(page, "demoModeThinking");
    await ask(page, "What is carbon, in one line?");
    await ended(page);
    await ask(page, "Explain carbon again, slowly, in detail");
    await page.locator("details.reasoning").last().waitFor();
    await page.reload();
    endsBefore = 1; // the chat's earlier run is replayed above the running one
    await page.locator("#transcript[data-attached]").waitFor();
    await ended(page);
    const users = await page.locator(".user").allInnerTexts();
    const count = (text) => users.filter((u) => u.includes(text)).length;
    if (count("Explain carbon again") !== 1 || count("What is carbon, in one line?") !== 1) throw new Error(users.join("|"));
  });

  await check("a chat reopens with its history replayed and goes on", page, async () => {
    await page.click("#refresh-chats");
    const chat = page.locator("[data-chat]", { hasText: "What is the weather in Tokyo?" }).first();
    await chat.waitFor();
    await chat.click();
    await page.locator(".content").first().waitFor();
    const before = await page.locator(".user").count();
    if (before < 1) throw new Error("no replayed message");
    await ask(page, "And tomorrow?");
    await ended(page);
    const after = await page.locator(".user").count();
    if (after !== before + 1) throw new Error(`${before} → ${after} messages`);
    // Compacting the chat now: summarised, or nothing old enough to summarise yet.
    await page.click("#compact");
    await page.locator("#status", { hasText: /Compacted|compact/i }).waitFor();
  });

  await check("the page is usable in a narrow window at 200 % text", page, async () => {
    await page.setViewportSize({ width: 420, height: 900 });
    await page.evaluate(() => { document.documentElement.style.fontSize = "200%"; });
    const box = await page.locator("#send").boundingBox();
    if (!box || box.x + box.width > 420) throw new Error(`send button at ${JSON.stringify(box)}`);
    await page.keyboard.press("Tab");
    const focused = await page.evaluate(() => document.activeElement?.tagName);
    if (!focused) throw new Error("nothing focusable");
  });

  if (problems.length) throw new Error(`browser errors: ${problems.join("; ")}`);
}

if (process.env.AGW_AUTH_BASE) {
  const { page } = await open(process.env.AGW_AUTH_BASE);
  await check("with auth on, the agents need the token entered for the tab", page, async () => {
    await page.getByText(/401/).first().waitFor();
    await page.fill("#token", process.env.AGW_TOKEN);
    await page.click('#login button[type="submit"]');
    await page.locator('[data-agent="demoModePlain"]').waitFor();
    await pick(page, "demoModePlain");
    await ask(page, "Hello?");
    await ended(page);
    const kept = await page.evaluate(() => sessionStorage.getItem("agw.token"));
    if (!kept) throw new Error("the token is not kept for the tab");
  });
}

await browser.close();
console.log(`${passed} console checks done`);
