/**
 * The workspace calendar the Gantt and the planner's prompt share, pure: working weekdays, the
 * built-in public holidays of a locale, the team's own days off, the time zone "today" is read
 * in. From, per field, first that says: the run's `context.calendar` ({ locale, workdays,
 * holidays, timezone }), the context's top-level `workdays` / `holidays` / `timezone`, then the
 * workspace's stored calendar (PUT /api/calendar, CalendarSettingSchema), then the configuration
 * (TOOLCHAIN_HOLIDAY_LOCALE, TOOLCHAIN_WORKDAYS, TOOLCHAIN_TIMEZONE), then Monday–Friday,
 * "intl", UTC. A bad configured value fails loudly, naming the variable; bad values in a context
 * are left out (the Gantt's own arguments are validated by its schema, a stored calendar by its own).
 */
import { z } from "zod";
import { ErrorCode, ToolchainError } from "../../src/kernel/errors.js";
import { isIsoDate } from "./fields.js";
import { defaultHolidayLocale, HOLIDAY_LOCALES, holidaysOf, type HolidayLocale } from "./holidays.js";

export interface WorkspaceCalendar {
  workdays: number[];
  locale: HolidayLocale;
  holidays: string[];
  timeZone: string;
}

const isObject = (v: unknown): v is Record<string, unknown> => typeof v === "object" && v !== null && !Array.isArray(v);
const validZone = (tz: unknown): tz is string => {
  if (typeof tz !== "string" || !tz.trim()) return false;
  try {
    new Intl.DateTimeFormat("en-US", { timeZone: tz });
    return true;
  } catch {
    return false;
  }
};
/** A workspace's stored calendar: what it says overrides the configuration; what it leaves out does not. */
export const CalendarSettingSchema = z
  .object({
    locale: z
      .enum(HOLIDAY_LOCALES)
      .optional()
      .describe("Built-in public holidays (intl, US, GB, DE, FR, NL, CA, AU, none)"),
    workdays: z
      .array(z.number().int().min(1).max(7))
      .min(1)
      .max(7)
      .optional()
      .describe("ISO weekdays, 1 = Monday … 7 = Sunday"),
    holidays: z
      .array(z.string().refine(isIsoDate, "dates are YYYY-MM-DD"))
      .max(1_000)
      .optional()
      .describe("The team's own days off"),
    timezone: z
      .string()
      .max(100)
      .refine((tz) => validZone(tz), "an IANA time zone, e.g. Europe/Berlin")
      .optional()
      .describe("The zone today's date is read in"),
  })
  .strict();
export type CalendarSetting = z.infer<typeof CalendarSettingSchema>;

const weekdays = (v: unknown): number[] | undefined =>
  Array.isArray(v) && v.length > 0 && v.every((d) => Number.isInteger(d) && d >= 1 && d <= 7)
    ? [...new Set(v as number[])]
    : undefined;

function configured(env: NodeJS.ProcessEnv) {
  const raw = env.TOOLCHAIN_WORKDAYS?.trim();
  const workdays = raw ? weekdays(raw.split(/[\s,]+/).map(Number)) : undefined;
  if (raw && !workdays)
    throw new ToolchainError(
      ErrorCode.INVALID_INPUT,
      `TOOLCHAIN_WORKDAYS must list ISO weekdays 1 (Monday) to 7 (Sunday), e.g. "1,2,3,4,5", got ${JSON.stringify(raw)}`,
      { effectStarted: false },
    );
  const tz = env.TOOLCHAIN_TIMEZONE?.trim();
  if (tz && !validZone(tz))
    throw new ToolchainError(
      ErrorCode.INVALID_INPUT,
      `TOOLCHAIN_TIMEZONE must be an IANA time zone (e.g. Europe/Berlin), got ${JSON.stringify(tz)}`,
      { effectStarted: false },
    );
  return { workdays, locale: defaultHolidayLocale(env), timeZone: tz || undefined };
}

export function workspaceCalendar(
  context: unknown,
  env: NodeJS.ProcessEnv = process.env,
  stored: CalendarSetting = {},
): WorkspaceCalendar {
  const ctx = isObject(context) ? context : {};
  const cal = isObject(ctx.calendar) ? ctx.calendar : {};
  const conf = configured(env);
  const locale = [cal.locale, ctx.locale]
    .map((l) => (typeof l === "string" ? HOLIDAY_LOCALES.find((x) => x.toLowerCase() === l.toLowerCase()) : undefined))
    .find((l) => l !== undefined);
  const holidays = [cal.holidays, ctx.holidays, stored.holidays].find(Array.isArray) as unknown[] | undefined;
  return {
    workdays: weekdays(cal.workdays) ?? weekdays(ctx.workdays) ?? stored.workdays ?? conf.workdays ?? [1, 2, 3, 4, 5],
    locale: locale ?? stored.locale ?? conf.locale,
    holidays: (holidays ?? []).filter((h): h is string => typeof h === "string" && isIsoDate(h)).slice(0, 1_000),
    timeZone:
      [cal.timezone, cal.timeZone, ctx.timezone, ctx.timeZone].find(validZone) ??
      stored.timezone ??
      conf.timeZone ??
      "UTC",
  };
}

/** Today's date (YYYY-MM-DD) and weekday name in a time zone. */
export function today(now: number, timeZone: string): { date: string; weekday: string } {
  const p = Object.fromEntries(
    new Intl.DateTimeFormat("en-US", { timeZone, year: "numeric", month: "2-digit", day: "2-digit", weekday: "long" })
      .formatToParts(new Date(now))
      .map((x) => [x.type, x.value]),
  );
  return { date: `${p.year}-${p.month}-${p.day}`, weekday: p.weekday! };
}

/** The locale's public holidays from `from` for `days` days (what a prompt lists as "coming up"). */
export function upcomingHolidays(locale: HolidayLocale, from: string, days = 120): string[] {
  const end = new Date(Date.parse(`${from}T00:00:00Z`) + days * 86_400_000).toISOString().slice(0, 10);
  const y = Number(from.slice(0, 4));
  return [...holidaysOf(locale, y), ...holidaysOf(locale, y + 1)].filter((d) => d >= from && d <= end);
}
