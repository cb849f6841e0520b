/**
 * Compile-time only: the runtime's own view shapes against the API's schemas (src/api/schemas.ts),
 * which the console's types are inferred from. A field the runtime adds without the schema (the
 * console would never see it), or one the schema declares that the runtime does not produce,
 * fails `npm run typecheck`.
 */
import type { PendingConfirmation } from "../kernel/pending.js";
import type { RunView, StepView } from "../kernel/run-view.js";
import type { InboxItem } from "./approval-view.js";
import type { WireInboxItem, WirePendingConfirmation, WireRunView, WireStepView } from "./schemas.js";

/** The declared keys of T (a loose object's index signature left out). */
type Known<T> = keyof { [K in keyof T as string extends K ? never : K]: T[K] };
/** Keys on one side only: must be `never`. */
type OneSided<A, B> = Exclude<Known<A>, Known<B>> | Exclude<Known<B>, Known<A>>;
type Never<T extends never> = T;

export type WireDrift = [
  Never<OneSided<StepView, WireStepView>>,
  // the API adds traceId to the runtime's view
  Never<OneSided<RunView, Omit<WireRunView, "traceId">>>,
  Never<OneSided<PendingConfirmation, WirePendingConfirmation>>,
  Never<OneSided<InboxItem, WireInboxItem>>,
];
