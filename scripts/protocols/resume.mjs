// Crash recovery (issue 37) with the real clients: agw is killed with SIGKILL while two runs
// stream — one read by the `ai` package's chat transport, one by the phase stream's parser —
// and started again on the same chat directory. The restarted agw resumes both; the clients
// re-attach the way each protocol does (the transport's `reconnectToStream`, the phase stream's
// attach) and must end with the answer exactly once: the AI SDK message drops the text parts the
// `data-agw-resume` part names (found by their `providerMetadata.agw.contentId`), the phase
// parser drops the text since the last `tool_end` at its `resume` line.
//
//   node resume.mjs start STATE   — starts both runs, writes STATE once each has streamed three
//                                   pieces, then reads on until agw dies (run.sh kills it)
//   node resume.mjs finish STATE  — re-attaches both on the restarted agw and checks them
// Run by run.sh (AGW_BASE).
import assert from 'node:assert/strict';
import { readFileSync, writeFileSync } from 'node:fs';
import { DefaultChatTransport, readUIMessageStream } from 'ai';
import { PhaseStreamParser } from './phase_parser.mjs';

const [, , step, stateFile] = process.argv;
const BASE = process.env.AGW_BASE;
const QUESTION = 'survive a crash';
const ANSWER = Array.from({ length: 30 }, (_, i) => `w${i} `).join('');
const CHAT = 'chat-crash';

const texts = (m) => m.parts.filter((p) => p.type === 'text');
const pieces = (text) => text.split(' ').filter(Boolean).length;

if (step === 'start') {
  const transport = new DefaultChatTransport({ api: `${BASE}/api/ai-sdk/plain/chat` });
  const stream = await transport.sendMessages({
    chatId: CHAT,
    messages: [{ id: 'u1', role: 'user', parts: [{ type: 'text', text: QUESTION }] }],
    trigger: 'submit-message',
    messageId: undefined,
    abortSignal: undefined,
  });
  const response = await fetch(`${BASE}/api/phase/plain`, {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify({ messages: [{ role: 'user', content: QUESTION }] }),
  });
  const runId = response.headers.get('x-agw-run-id');
  assert.ok(runId, 'the phase stream names its run');

  let message;
  const parser = new PhaseStreamParser();
  let written = false;
  const maybeWrite = () => {
    if (written || !message || pieces(texts(message).map((p) => p.text).join('')) < 3 || pieces(parser.text) < 3) return;
    written = true;
    writeFileSync(stateFile, JSON.stringify({ message, phase: { runId, text: parser.text } }));
    console.log('both runs streamed three pieces; waiting for agw to be killed');
  };
  const aiSdk = (async () => {
    for await (const m of readUIMessageStream({ stream, onError: () => {}, terminateOnError: false })) {
      message = structuredClone(m);
      maybeWrite();
    }
  })();
  parser.callbacks.onText = () => maybeWrite();
  const phase = parser.consume(response);
  // Both end when agw is killed (a broken connection); neither may end before.
  const ended = await Promise.allSettled([aiSdk, phase]);
  assert.ok(written, `killed before both runs streamed: ${JSON.stringify(ended)}`);
  assert.ok(!ended.some((e) => e.status === 'fulfilled' && pieces(parser.text) === 30), 'the runs did not finish');
  console.log('ok   resume: two runs were streaming when agw was killed');
  process.exit(0);
}

assert.equal(step, 'finish', 'usage: resume.mjs start|finish STATE');
const state = JSON.parse(readFileSync(stateFile, 'utf8'));
let passed = 0;
async function check(name, fn) {
  await fn();
  passed += 1;
  console.log(`ok   resume: ${name}`);
}

await check('ai-sdk: reconnectToStream continues the message; the data-agw-resume part names the superseded text part', async () => {
  const transport = new DefaultChatTransport({ api: `${BASE}/api/ai-sdk/plain/chat` });
  const stream = await transport.reconnectToStream({ chatId: CHAT });
  assert.ok(stream, 'the resumed run is the chat\'s running run');
  const errors = [];
  let message = state.message;
  for await (const m of readUIMessageStream({ stream, message, onError: (e) => errors.push(e), terminateOnError: false })) {
    message = m;
  }
  assert.deepEqual(errors, []);
  const resume = message.parts.find((p) => p.type === 'data-agw-resume');
  assert.ok(resume, JSON.stringify(message.parts));
  assert.equal(resume.data.attempt, 1);
  const superseded = new Set([...resume.data.contentIds, ...resume.data.reasoningIds]);
  const idOf = (p) => p.providerMetadata?.agw?.contentId;
  const dropped = texts(message).filter((p) => superseded.has(idOf(p)));
  const kept = texts(message).filter((p) => !superseded.has(idOf(p)));
  assert.equal(dropped.length, 1, JSON.stringify(message.parts));
  assert.ok(dropped[0].text.startsWith('w0 w1 w2 '), dropped[0].text);
  assert.equal(kept.map((p) => p.text).join(''), ANSWER, 'the answer once, after dropping what was superseded');
  assert.ok(kept.every((p) => idOf(p)), 'every text part names its block');
});

await check('phase: the attach starts with a resume line; dropping the superseded text leaves the answer once', async () => {
  const parser = new PhaseStreamParser();
  parser.text = state.phase.text;
  const response = await fetch(`${BASE}/api/phase/attach?runId=${state.phase.runId}`);
  assert.equal(response.status, 200, await response.clone().text());
  await parser.consume(response);
  const types = parser.lines.map((l) => l.type);
  assert.equal(types[0], 'resume', JSON.stringify(types));
  assert.equal(parser.lines[0].data.attempt, 1);
  assert.equal(types.at(-1), 'done', JSON.stringify(types));
  assert.equal(parser.text, ANSWER);
});

console.log(`resume: ${passed} passed`);
