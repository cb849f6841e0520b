/**
 * Built-in public holidays for common locales, computed per year (fixed dates, nth weekdays and
 * the Easter-based feasts), so a schedule that crosses into any year skips them without a list.
 *
 * `"intl"` (the default when nothing is configured) holds only the days nearly every team takes
 * off, New Year's Day and Christmas Day, so Christmas is never scheduled by default; `"none"` turns
 * built-in holidays off (a team that works them lists its own calendar instead). Observed-day
 * shifts (a holiday on a Saturday moved to Friday) are not applied: those vary by employer.
 */
import { ErrorCode, ToolchainError } from "../../src/kernel/errors.js";

export const HOLIDAY_LOCALES = ["intl", "none", "US", "GB", "DE", "FR", "NL", "CA", "AU"] as const;
export type HolidayLocale = (typeof HOLIDAY_LOCALES)[number];

/** The locale used when the input names none: TOOLCHAIN_HOLIDAY_LOCALE, else "intl". */
export function defaultHolidayLocale(env: NodeJS.ProcessEnv = process.env): HolidayLocale {
  const v = env.TOOLCHAIN_HOLIDAY_LOCALE?.trim();
  if (!v) return "intl";
  const found = HOLIDAY_LOCALES.find((l) => l.toLowerCase() === v.toLowerCase());
  if (!found)
    throw new ToolchainError(
      ErrorCode.INVALID_INPUT,
      `TOOLCHAIN_HOLIDAY_LOCALE must be one of ${HOLIDAY_LOCALES.join(", ")}, got ${JSON.stringify(v)}`,
      { effectStarted: false },
    );
  return found;
}

const iso = (y: number, m: number, d: number) => new Date(Date.UTC(y, m - 1, d)).toISOString().slice(0, 10);
const addDays = (date: string, n: number) =>
  new Date(Date.parse(`${date}T00:00:00Z`) + n * 86_400_000).toISOString().slice(0, 10);

/** Western Easter Sunday (the anonymous Gregorian algorithm). */
export function easterSunday(y: number): string {
  const a = y % 19;
  const b = Math.floor(y / 100);
  const c = y % 100;
  const d = Math.floor(b / 4);
  const e = b % 4;
  const f = Math.floor((b + 8) / 25);
  const g = Math.floor((b - f + 1) / 3);
  const h = (19 * a + b - d - g + 15) % 30;
  const i = Math.floor(c / 4);
  const k = c % 4;
  const l = (32 + 2 * e + 2 * i - h - k) % 7;
  const m = Math.floor((a + 11 * h + 22 * l) / 451);
  const month = Math.floor((h + l - 7 * m + 114) / 31);
  const day = ((h + l - 7 * m + 114) % 31) + 1;
  return iso(y, month, day);
}

/** The n-th (1-based; -1 = last) ISO weekday (1 = Monday) of a month. */
function nthWeekday(y: number, m: number, weekday: number, n: number): string {
  if (n > 0) {
    const first = new Date(Date.UTC(y, m - 1, 1));
    const wd = ((first.getUTCDay() + 6) % 7) + 1;
    return iso(y, m, 1 + ((weekday - wd + 7) % 7) + (n - 1) * 7);
  }
  const last = new Date(Date.UTC(y, m, 0));
  const wd = ((last.getUTCDay() + 6) % 7) + 1;
  return iso(y, m, last.getUTCDate() - ((wd - weekday + 7) % 7));
}

/** The locale's public holidays in year `y`, sorted. */
export function holidaysOf(locale: HolidayLocale, y: number): string[] {
  const easter = easterSunday(y);
  const e = (n: number) => addDays(easter, n);
  const newYear = iso(y, 1, 1);
  const christmas = iso(y, 12, 25);
  const boxing = iso(y, 12, 26);
  let days: string[];
  switch (locale) {
    case "none":
      days = [];
      break;
    case "intl":
      days = [newYear, christmas];
      break;
    case "US":
      days = [
        newYear,
        nthWeekday(y, 1, 1, 3),
        nthWeekday(y, 2, 1, 3),
        nthWeekday(y, 5, 1, -1),
        iso(y, 6, 19),
        iso(y, 7, 4),
        nthWeekday(y, 9, 1, 1),
        iso(y, 11, 11),
        nthWeekday(y, 11, 4, 4),
        christmas,
      ];
      break;
    case "GB": // England and Wales
      days = [
        newYear,
        e(-2),
        e(1),
        nthWeekday(y, 5, 1, 1),
        nthWeekday(y, 5, 1, -1),
        nthWeekday(y, 8, 1, -1),
        christmas,
        boxing,
      ];
      break;
    case "DE": // nationwide
      days = [newYear, e(-2), e(1), iso(y, 5, 1), e(39), e(50), iso(y, 10, 3), christmas, boxing];
      break;
    case "FR":
      days = [
        newYear,
        e(1),
        iso(y, 5, 1),
        iso(y, 5, 8),
        e(39),
        e(50),
        iso(y, 7, 14),
        iso(y, 8, 15),
        iso(y, 11, 1),
        iso(y, 11, 11),
        christmas,
      ];
      break;
    case "NL":
      days = [newYear, e(-2), e(1), iso(y, 4, 27), iso(y, 5, 5), e(39), e(50), christmas, boxing];
      break;
    case "CA":
      days = [
        newYear,
        e(-2),
        victoriaDay(y),
        iso(y, 7, 1),
        nthWeekday(y, 9, 1, 1),
        nthWeekday(y, 10, 1, 2),
        christmas,
        boxing,
      ];
      break;
    case "AU":
      days = [newYear, iso(y, 1, 26), e(-2), e(-1), e(1), iso(y, 4, 25), christmas, boxing];
      break;
  }
  return [...new Set(days)].sort();
}

/** Canada's Victoria Day: the last Monday before May 25. */
function victoriaDay(y: number): string {
  const may24 = new Date(Date.UTC(y, 4, 24));
  const wd = ((may24.getUTCDay() + 6) % 7) + 1;
  return iso(y, 5, 24 - ((wd - 1 + 7) % 7));
}

/** Membership test over a locale's holidays plus a team's own dates, computed a year at a time. */
export class HolidaySet {
  private readonly years = new Map<number, ReadonlySet<string>>();
  constructor(
    readonly locale: HolidayLocale,
    private readonly own: ReadonlySet<string>,
  ) {}
  has(date: string): boolean {
    if (this.own.has(date)) return true;
    const y = Number(date.slice(0, 4));
    let set = this.years.get(y);
    if (!set) this.years.set(y, (set = new Set(holidaysOf(this.locale, y))));
    return set.has(date);
  }
}
