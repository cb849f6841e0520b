/**
 * The contract between the QTable skills and a model seam (splitWith, estimateWith): a seam
 * returns the model's raw answer (checked by the skill, never trusted), throws
 * `UnreadableAnswer` when the model answered something that is not JSON of the asked shape (the
 * skill repairs that like any bad answer), and throws anything else when there is no answer.
 */
export const UNREADABLE_ANSWER = "UNREADABLE_ANSWER";

export class UnreadableAnswer extends Error {
  override readonly name = "UnreadableAnswer";
  readonly code = UNREADABLE_ANSWER;
}

/** Checked by code, not instanceof: the seam may come from another copy of the package. */
export const isUnreadable = (e: unknown): e is UnreadableAnswer =>
  typeof e === "object" && e !== null && (e as { code?: unknown }).code === UNREADABLE_ANSWER;
