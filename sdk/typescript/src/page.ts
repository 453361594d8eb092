/**
 * A list you can await for one page, iterate for every item (`for await`), or gather
 * with `toArray()`: Runtime Cloud's `Page`.
 */
export class Page<T> implements AsyncIterable<T> {
  constructor(
    /** This page's items. */
    readonly data: T[],
    /** The next page's cursor; null on the last page. */
    readonly nextCursor: string | null,
    private readonly fetchPage: (cursor: string) => Promise<Page<T>>,
  ) {}

  get hasMore(): boolean {
    return this.nextCursor !== null;
  }

  /** The next page, or null after the last. */
  async next(): Promise<Page<T> | null> {
    return this.nextCursor === null ? null : this.fetchPage(this.nextCursor);
  }

  /** This page and every one after it, fetched as you go. */
  async *pages(): AsyncGenerator<Page<T>> {
    for (let page: Page<T> | null = this; page; page = await page.next()) yield page;
  }

  async *[Symbol.asyncIterator](): AsyncGenerator<T> {
    for await (const page of this.pages()) yield* page.data;
  }

  /** Every item of every page (at most `limit`). */
  async toArray(limit = 10_000): Promise<T[]> {
    const all: T[] = [];
    for await (const item of this) {
      if (all.length >= limit) break;
      all.push(item);
    }
    return all;
  }
}
