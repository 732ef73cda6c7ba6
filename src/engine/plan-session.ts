/**
 * A split under way in this term: its iterator, and the chunk being filled. Kept by the run
 * book between turns, so planning goes on where the last slice stopped.
 */
export interface PlanSession {
  readonly iterator: Iterator<unknown> | AsyncIterator<unknown>;
  readonly async: boolean;
  /** The epoch its chunks are written under. */
  readonly epoch: number;
  /** Aborts the split's own signal: at the end of the term, or when it times out. */
  readonly abort: AbortController;
  /** Items of the split already persisted by an earlier attempt, still to be passed over. */
  skip: number;
  /** Index of the next item the split gives. */
  next: number;
  chunk: string[];
  /** Chunks persisted in the record when the session started, and chunks it wrote since. */
  readonly baseChunks: number;
  written: number;
  /** The split has ended. */
  done: boolean;
}
