// The phase stream's line parser, shaped like its design's client guide (issue 35): fetch, the
// body's reader, a TextDecoder, each chunk split on '\n' (the unfinished tail kept for the next
// chunk), blank lines skipped, each line JSON.parse'd and dispatched on its `type` to a callback.
// Shared by phase.mjs and resume.mjs.

/** The guide's parser: one instance per stream, callbacks per line type. */
export class PhaseStreamParser {
  constructor(callbacks = {}) {
    this.callbacks = callbacks;
    this.buffer = '';
    this.phase = null;
    this.phases = [];
    this.text = '';
    this.citations = [];
    this.lines = [];
    // Where the text stood at the last tool_end: a resume drops what came after.
    this.settled = 0;
  }

  /** Reads a whole response body, handling each line as it arrives. */
  async consume(response) {
    const reader = response.body.getReader();
    const decoder = new TextDecoder();
    for (;;) {
      const { done, value } = await reader.read();
      if (done) break;
      this.buffer += decoder.decode(value, { stream: true });
      const lines = this.buffer.split('\n');
      this.buffer = lines.pop();
      for (const line of lines) {
        if (line.trim() === '') continue; // the heartbeat
        this.handleLine(line);
      }
    }
    if (this.buffer.trim() !== '') this.handleLine(this.buffer);
  }

  handleLine(line) {
    const event = JSON.parse(line);
    this.lines.push(event);
    const { type, phase, data } = event;
    switch (type) {
      case 'phase_change':
        this.phase = phase;
        this.phases.push(phase);
        this.callbacks.onPhaseChange?.(phase, data.message);
        break;
      case 'thinking':
        this.callbacks.onThinking?.(data.content);
        break;
      case 'text':
        this.text += data.content;
        this.callbacks.onText?.(data.content);
        break;
      case 'citation':
        this.citations.push(data);
        this.callbacks.onCitation?.(data);
        break;
      case 'tool_start':
        this.callbacks.onToolStart?.(data);
        break;
      case 'tool_end':
        this.settled = this.text.length;
        this.callbacks.onToolEnd?.(data);
        break;
      case 'resume':
        // agw resumed the run after it stopped: the answer being written is superseded.
        this.text = this.text.slice(0, this.settled);
        this.callbacks.onResume?.(data);
        break;
      case 'done':
        this.callbacks.onDone?.(data);
        break;
      case 'revoke':
        // The guide's client takes the withdrawn text back out of what it shows.
        this.text = this.text.slice(0, data.offset) + this.text.slice(data.offset + data.length);
        this.callbacks.onRevoke?.(data);
        break;
      case 'warning':
        this.callbacks.onWarning?.(data);
        break;
      case 'error':
        this.callbacks.onError?.(data);
        break;
      default:
        // Unknown types (agw's input_required among them for a client that has no use for it).
        this.callbacks.onOther?.(event);
    }
  }
}
