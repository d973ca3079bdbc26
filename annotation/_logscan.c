/* The compiled log reader: a regular CSV or TSV search log to per-query statistics.
 *
 * It computes exactly what the SQL of annotation/sampling_sql.py computes, for the logs it
 * can read without doubt: every line one record with the header's number of fields, valid
 * UTF-8 without NUL, LF or CR LF line ends, clean quoting, numbers and ISO 8601 times in
 * their plain forms. At the first line outside that subset it stops and says why; the
 * caller then reads the log with DuckDB, which handles (and reports) everything else. So
 * the two readers never disagree: this one either gives DuckDB's answer or none.
 *
 * Why compiled: the statistics need a pass over every line, a dictionary of distinct
 * strings and a walk through every session in time order. DuckDB does each with general
 * operators (hash aggregations, a window sort of all lines); here the dictionaries are
 * built while parsing, sessions and users come out of a radix partition of their ids'
 * hashes into cache-sized buckets (a dictionary of millions of ids costs a cache miss per
 * line), and both file halves are parsed on their own threads.
 *
 * Phases, one method each (annotation/sampling_native.py drives them):
 *   read()      parse the file on N threads: per line the raw query (an id in a dictionary
 *               of distinct strings), the hashes of its session and user ids, time and
 *               click; per raw string the sums of its lines;
 *   foreign()   the raw strings past ASCII, for Python to normalise while ascii()
 *               normalises the others here;
 *   set_norms() the normalised texts of those (raw strings are grouped by normalised text
 *               as they come in);
 *   screen()    the texts the privacy screen must see (those with a digit, "@" or "=");
 *   number()    group by the text kept (masked or not), sort it, give dense ids in text
 *               order, sum per query;
 *   follow()    distinct sessions and users per query, the session walk: successors,
 *               abandonment, and the similarity test of (query, next query) pairs;
 *   close()     give every table back at once.
 */
#define PY_SSIZE_T_CLEAN
#define _GNU_SOURCE
#include <Python.h>

#include <fcntl.h>
#include <locale.h>
#include <malloc.h>
#include <math.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>
#ifdef __SSE2__
#include <emmintrin.h>
#endif

#define NONE UINT32_MAX
#define BLOCK_LINES (1u << 20)
#define READ_BYTES (16u << 20)
#define MAX_THREADS 8
#define MAX_COLUMNS 256
#define MAX_LINE 1999999
#define MEMORY_REASON "its tables would pass the compiled reader's memory limit (native_memory_limit)"

/* ------------------------------------------------------------------ memory budget */

typedef struct {
    atomic_size_t used;
    atomic_size_t peak;  /* the most ever held */
    size_t budget;
    atomic_int stop;  /* 1 once any thread gives up (or the caller cancels) */
} Shared;

/* Large arrays (hash tables, line blocks) get transparent huge pages: their accesses are
 * random, and with 4 KB pages nearly each one also misses the TLB, which on a virtual
 * machine costs a nested page walk and makes the CPU drop the software prefetches these
 * lookups rely on. Below the threshold, plain malloc. */
#define HUGE_BYTES ((size_t)2 << 20)

static void *halloc(size_t size) {
    if (size < HUGE_BYTES) return malloc(size ? size : 1);
    void *p = mmap(NULL, size, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (p == MAP_FAILED) return NULL;
    madvise(p, size, MADV_HUGEPAGE);
    return p;
}

static void hfree(void *p, size_t size) {
    if (!p) return;
    if (size < HUGE_BYTES) free(p);
    else munmap(p, size);
}

static void *hrealloc(void *old, size_t old_size, size_t size) {
    if (old_size < HUGE_BYTES && size < HUGE_BYTES) return realloc(old, size ? size : 1);
    if (old_size >= HUGE_BYTES && size >= HUGE_BYTES) {
        void *p = mremap(old, old_size, size, MREMAP_MAYMOVE);
        if (p == MAP_FAILED) return NULL;
        madvise(p, size, MADV_HUGEPAGE);
        return p;
    }
    void *p = halloc(size);
    if (!p) return NULL;
    memcpy(p, old, old_size < size ? old_size : size);
    hfree(old, old_size);
    return p;
}

static void note_peak(Shared *sh, size_t now) {
    size_t seen = atomic_load(&sh->peak);
    while (now > seen && !atomic_compare_exchange_weak(&sh->peak, &seen, now)) {
    }
}

static void *bmalloc(Shared *sh, size_t size) {
    size_t now = atomic_fetch_add(&sh->used, size) + size;
    if (now > sh->budget) {
        atomic_fetch_sub(&sh->used, size);
        return NULL;
    }
    note_peak(sh, now);
    void *p = halloc(size);
    if (!p) atomic_fetch_sub(&sh->used, size);
    return p;
}

static void *bcalloc(Shared *sh, size_t count, size_t size) {
    void *p = bmalloc(sh, count * size);
    /* fresh mappings are zero already */
    if (p && count * size < HUGE_BYTES) memset(p, 0, count * size);
    return p;
}

static void *brealloc(Shared *sh, void *old, size_t old_size, size_t size) {
    if (size > old_size) {
        size_t now = atomic_fetch_add(&sh->used, size - old_size) + (size - old_size);
        if (now > sh->budget) {
            atomic_fetch_sub(&sh->used, size - old_size);
            return NULL;
        }
        note_peak(sh, now);
    }
    void *p = old ? hrealloc(old, old_size, size) : halloc(size);
    if (!p) {
        if (size > old_size) atomic_fetch_sub(&sh->used, size - old_size);
        return NULL;
    }
    if (size < old_size) atomic_fetch_sub(&sh->used, old_size - size);
    return p;
}

static void bfree(Shared *sh, void *p, size_t size) {
    if (!p) return;
    hfree(p, size);
    atomic_fetch_sub(&sh->used, size);
}

/* ------------------------------------------------------------------ hashing */

static inline uint64_t mix(uint64_t a, uint64_t b) {
    __uint128_t r = (__uint128_t)a * b;
    return (uint64_t)r ^ (uint64_t)(r >> 64);
}

/* Two independent 64-bit hashes in one pass: query strings (raw and normalised) are told
 * apart by both and their length (a 128-bit identity: for ten million distinct strings the
 * chance of any collision is about 1e-25), which spares reading the stored text on every
 * lookup. */
static inline uint64_t hash_core(const uint8_t *p, size_t n, uint64_t *second, int padded) {
    uint64_t h = 0x9E3779B97F4A7C15ull ^ ((uint64_t)n * 0xff51afd7ed558ccdull);
    uint64_t g = 0xC2B2AE3D27D4EB4Full ^ ((uint64_t)n * 0x165667B19E3779F9ull);
    while (n >= 8) {
        uint64_t v;
        memcpy(&v, p, 8);
        h = mix(h ^ v, 0xbf58476d1ce4e5b9ull);
        g = mix(g ^ v, 0x9FB21C651E98DF25ull);
        p += 8;
        n -= 8;
    }
    uint64_t v = 0;
#if __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__
    if (padded) {  /* a whole word read, the bytes past the end masked off */
        memcpy(&v, p, 8);
        v = n ? v & (~0ull >> (64 - 8 * n)) : 0;
    } else {
        memcpy(&v, p, n);
    }
#else
    (void)padded;
    memcpy(&v, p, n);
#endif
    h = mix(h ^ v ^ 0x2545F4914F6CDD1Dull, 0x94d049bb133111ebull);
    g = mix(g ^ v ^ 0x27BB2EE687B0B0FDull, 0xD6E8FEB86659FD93ull);
    *second = mix(g, 0xff51afd7ed558ccdull);
    return mix(h, 0x9E3779B97F4A7C15ull) | 1; /* never 0: 0 marks an empty slot */
}

static inline uint64_t hash_pair(const uint8_t *p, size_t n, uint64_t *second) {
    return hash_core(p, n, second, 0);
}

/* The same hashes, for text with at least 8 readable bytes after it (SLACK: buffers are
 * made that much longer): the last word is read whole, sparing a copy of variable size. */
#define SLACK 8

static inline uint64_t hash_pair_padded(const uint8_t *p, size_t n, uint64_t *second) {
    return hash_core(p, n, second, 1);
}

/* The first of the pair alone (the compiler drops the second's work when inlined). */
static inline uint64_t hash_padded(const uint8_t *p, size_t n) {
    uint64_t unused;
    return hash_core(p, n, &unused, 1);
}

/* Tables grow past 70% full: fuller tables probe longer, emptier ones cost memory. */
static inline size_t max_fill(unsigned bits) { return ((size_t)7 << bits) / 10; }

/* ------------------------------------------------------------------ string dictionary */

typedef struct {
    uint64_t h, h2;      /* two hashes: with the length, the string's identity */
    uint32_t off, len;   /* bytes in the arena */
    uint32_t n, rc_n, zero_n, bad_ts;
    double max_ts;       /* NAN: no time among its lines */
} Entry;

typedef struct {
    uint64_t *slots;     /* (hash & ~0xffffffff) | id+1, 0 = empty */
    unsigned bits;
    Entry *e;
    size_t count, cap;
    uint8_t *arena;
    size_t alen, acap;
} Dict;

static int dict_init(Shared *sh, Dict *d, unsigned bits) {
    memset(d, 0, sizeof *d);
    d->bits = bits;
    d->slots = bcalloc(sh, (size_t)1 << bits, sizeof(uint64_t));
    d->cap = (size_t)1 << 12;  /* entries grow on their own, by doubling */
    d->e = bmalloc(sh, d->cap * sizeof(Entry));
    d->acap = (size_t)1 << 20;
    d->arena = bmalloc(sh, d->acap);
    return d->slots && d->e && d->arena;
}

static void dict_free(Shared *sh, Dict *d) {
    bfree(sh, d->slots, ((size_t)1 << d->bits) * sizeof(uint64_t));
    bfree(sh, d->e, d->cap * sizeof(Entry));
    bfree(sh, d->arena, d->acap);
    memset(d, 0, sizeof *d);
}

/* The sums of ``from``'s lines added to ``into``'s (the same string in another half of the
 * file, or a raw variant of a normalised text). */
static void add_sums(Entry *into, const Entry *from) {
    into->n += from->n;
    into->rc_n += from->rc_n;
    into->zero_n += from->zero_n;
    into->bad_ts += from->bad_ts;
    if (!isnan(from->max_ts) && (isnan(into->max_ts) || from->max_ts > into->max_ts))
        into->max_ts = from->max_ts;
}

static int dict_grow(Shared *sh, Dict *d) {
    unsigned bits = d->bits + 1;
    size_t nslots = (size_t)1 << bits;
    uint64_t *slots = bcalloc(sh, nslots, sizeof(uint64_t));
    if (!slots) return 0;
    for (size_t i = 0; i < d->count; i++) {
        size_t s = d->e[i].h >> (64 - bits);
        while (slots[s]) s = (s + 1) & (nslots - 1);
        slots[s] = (d->e[i].h & 0xffffffff00000000ull) | (uint64_t)(i + 1);
    }
    bfree(sh, d->slots, ((size_t)1 << d->bits) * sizeof(uint64_t));
    d->slots = slots;
    d->bits = bits;
    return 1;
}

static int dict_more_entries(Shared *sh, Dict *d) {
    size_t cap = d->cap + d->cap / 2;  /* by half: doubling would leave up to half unused */
    Entry *e = brealloc(sh, d->e, d->cap * sizeof(Entry), cap * sizeof(Entry));
    if (!e) return 0;
    d->e = e;
    d->cap = cap;
    return 1;
}

static inline void dict_prefetch(const Dict *d, uint64_t h) {
    __builtin_prefetch(&d->slots[h >> (64 - d->bits)]);
}

static inline void dict_prefetch_entry(const Dict *d, uint64_t h) {
    uint64_t v = d->slots[h >> (64 - d->bits)];
    if (v && (v & 0xffffffff00000000ull) == (h & 0xffffffff00000000ull)) {
        const Entry *e = &d->e[(v & 0xffffffffu) - 1];
        __builtin_prefetch(e);
    }
}

/* The id of string p[0:n] with hashes h and h2 (hash_pair), inserted if new; NONE when
 * memory ran out. Entries match by both hashes and the length (a 128-bit identity), so a
 * lookup never reads the stored text. */
static uint32_t dict_get2(Shared *sh, Dict *d, const uint8_t *p, uint32_t n, uint64_t h, uint64_t h2) {
    size_t mask = ((size_t)1 << d->bits) - 1;
    size_t s = h >> (64 - d->bits);
    uint64_t tag = h & 0xffffffff00000000ull;
    for (;;) {
        uint64_t v = d->slots[s];
        if (!v) break;
        if ((v & 0xffffffff00000000ull) == tag) {
            Entry *e = &d->e[(v & 0xffffffffu) - 1];
            if (e->h == h && e->h2 == h2 && e->len == n)
                return (uint32_t)((v & 0xffffffffu) - 1);
        }
        s = (s + 1) & mask;
    }
    if (d->count + 1 > max_fill(d->bits)) {
        if (!dict_grow(sh, d)) return NONE;
        return dict_get2(sh, d, p, n, h, h2);
    }
    if (d->count == d->cap && !dict_more_entries(sh, d)) return NONE;
    if (d->alen + n + SLACK > d->acap) {  /* texts keep SLACK bytes after them */
        size_t cap = d->acap + d->acap / 2;
        while (d->alen + n + SLACK > cap) cap += cap / 2;
        if (cap > UINT32_MAX) return NONE;
        uint8_t *a = brealloc(sh, d->arena, d->acap, cap);
        if (!a) return NONE;
        d->arena = a;
        d->acap = cap;
    }
    uint32_t id = (uint32_t)d->count++;
    Entry *e = &d->e[id];
    e->h = h;
    e->h2 = h2;
    e->off = (uint32_t)d->alen;
    e->len = n;
    e->n = e->rc_n = e->zero_n = e->bad_ts = 0;
    e->max_ts = NAN;
    memcpy(d->arena + d->alen, p, n);
    d->alen += n;
    d->slots[s] = tag | (uint64_t)(id + 1);
    return id;
}

/* ------------------------------------------------------------------ values */

static locale_t c_locale;

static inline int is_space(uint8_t c) {
    return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\v' || c == '\f';
}

/* A number as TRY_CAST(text AS DOUBLE) reads it: 1 a number (*out set), 0 certainly not a
 * number (NULL), -1 a form this reader does not decide (spaces, underscores, inf, nan...). */
static int read_number(const uint8_t *p, size_t n, double *out) {
    size_t i = 0, digits = 0;
    if (i < n && (p[i] == '+' || p[i] == '-')) i++;
    while (i < n && p[i] >= '0' && p[i] <= '9') i++, digits++;
    if (i < n && p[i] == '.') {
        i++;
        while (i < n && p[i] >= '0' && p[i] <= '9') i++, digits++;
    }
    int plain = digits > 0;
    if (plain && i < n && (p[i] == 'e' || p[i] == 'E')) {
        size_t j = i + 1, ed = 0;
        if (j < n && (p[j] == '+' || p[j] == '-')) j++;
        while (j < n && p[j] >= '0' && p[j] <= '9') j++, ed++;
        if (ed) i = j; else plain = 0;
    }
    if (plain && i == n && digits <= 15) {
        /* up to 15 significant digits: the integer and its power of ten are exact doubles,
         * so one division rounds correctly, as strtod does */
        uint64_t m = 0;
        int frac = -1, neg = p[0] == '-', exp_seen = 0;
        for (size_t k = 0; k < n && !exp_seen; k++) {
            uint8_t c = p[k];
            if (c >= '0' && c <= '9') { m = m * 10 + (c - '0'); if (frac >= 0) frac++; }
            else if (c == '.') frac = 0;
            else if (c == 'e' || c == 'E') exp_seen = 1;
        }
        if (!exp_seen) {
            static const double tens[] = {1e0, 1e1, 1e2, 1e3, 1e4, 1e5, 1e6, 1e7, 1e8,
                                          1e9, 1e10, 1e11, 1e12, 1e13, 1e14, 1e15};
            double v = frac > 0 ? (double)m / tens[frac] : (double)m;
            *out = neg ? -v : v;
            return 1;
        }
    }
    if (plain && i == n && n < 64) {
        char buf[64];
        memcpy(buf, p, n);
        buf[n] = 0;
        *out = strtod_l(buf, NULL, c_locale);
        return 1;
    }
    /* Not plain: decide only what is surely not a number. */
    size_t a = 0, b = n;
    while (a < b && is_space(p[a])) a++;
    while (b > a && is_space(p[b - 1])) b--;
    if (a == b) return -1;
    /* Something of digits, signs, points, underscores and exponents may be a number to
     * DuckDB; without a digit it is not ("-", "."). */
    int numberish = 1, digit = 0;
    for (size_t k = a; k < b; k++) {
        uint8_t c = p[k];
        digit |= c >= '0' && c <= '9';
        if (!((c >= '0' && c <= '9') || c == '+' || c == '-' || c == '.' || c == '_' ||
              c == 'e' || c == 'E')) {
            numberish = 0;
            break;
        }
    }
    if (numberish && digit) {
        /* a sign after a digit or two points make no number: dates such as 2025-02-30
         * are certainly not numbers (DuckDB does read "+-1", so other signs stay open) */
        int points = 0;
        for (size_t k = a; k < b; k++) {
            uint8_t c = p[k];
            points += c == '.';
            if ((c == '+' || c == '-') && k > a && p[k - 1] >= '0' && p[k - 1] <= '9') return 0;
        }
        return points > 1 ? 0 : -1;
    }
    if (numberish) return 0;
    /* inf, infinity, nan, and what strtod makes of nan(...): undecided */
    size_t s = a;
    while (s < b && (p[s] == '+' || p[s] == '-')) s++;
    size_t len = b - s;
    const char *w = (const char *)p + s;
    if ((len == 3 && strncasecmp(w, "inf", 3) == 0) || (len == 8 && strncasecmp(w, "infinity", 8) == 0) ||
        (len >= 3 && strncasecmp(w, "nan", 3) == 0 && (len == 3 || w[3] == '(')))
        return -1;
    return 0;
}

static inline int two(const uint8_t *p, int *v) {
    if (p[0] < '0' || p[0] > '9' || p[1] < '0' || p[1] > '9') return 0;
    *v = (p[0] - '0') * 10 + (p[1] - '0');
    return 1;
}

static int64_t days_from_civil(int64_t y, unsigned m, unsigned d) {
    y -= m <= 2;
    const int64_t era = (y >= 0 ? y : y - 399) / 400;
    const unsigned yoe = (unsigned)(y - era * 400);
    const unsigned doy = (153 * (m > 2 ? m - 3 : m + 9) + 2) / 5 + d - 1;
    const unsigned doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    return era * 146097 + (int64_t)doe - 719468;
}

/* epoch(TRY_CAST(text AS TIMESTAMPTZ)) for the strict form
 * YYYY-MM-DD[(T| )HH:MM[:SS[.f{1,6}]]][Z|+HH|+HH:MM|+HHMM]: 1 and *out; 0 for a text of
 * that form DuckDB reads as no time (February 30, 23:59:60, a date with a zone but no
 * time); -1 for anything else, left undecided. */
static int read_instant(const uint8_t *p, size_t n, double *out) {
    int y1, y2, mo, d, h = 0, mi = 0, s = 0;
    int64_t micros = 0;
    if (n < 10 || !two(p, &y1) || !two(p + 2, &y2) || p[4] != '-' || !two(p + 5, &mo) ||
        p[7] != '-' || !two(p + 8, &d))
        return -1;
    int year = y1 * 100 + y2;
    static const int dim[] = {31, 28, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31};
    /* a well-formed date that is no date (February 30, month 13): no time, certainly; the
     * rest of the text must still have the strict form for that to be sure */
    int invalid = mo < 1 || mo > 12 || d < 1;
    if (!invalid) {
        int leap = (year % 4 == 0 && year % 100 != 0) || year % 400 == 0;
        invalid = d > dim[mo - 1] + (mo == 2 && leap);
    }
    size_t i = 10;
    int offset = 0;
    if (i < n && (p[i] == 'Z' || p[i] == '+' || p[i] == '-')) {
        /* a date with a zone and no time: DuckDB reads none, in these forms */
        int zh, zm;
        if (p[i] == 'Z') return i + 1 == n ? 0 : -1;
        if (n == i + 3 && two(p + i + 1, &zh)) return 0;
        if (n == i + 6 && two(p + i + 1, &zh) && p[i + 3] == ':' && two(p + i + 4, &zm)) return 0;
        return -1;
    }
    if (i < n) {
        if (p[i] != 'T' && p[i] != ' ') return -1;
        i++;
        if (i + 5 > n || !two(p + i, &h) || p[i + 2] != ':' || !two(p + i + 3, &mi)) return -1;
        i += 5;
        if (i < n && p[i] == ':') {
            if (i + 3 > n || !two(p + i + 1, &s)) return -1;
            i += 3;
            if (i < n && p[i] == '.') {
                i++;
                int k = 0;
                int64_t f = 0;
                while (i < n && p[i] >= '0' && p[i] <= '9' && k < 7) f = f * 10 + (p[i++] - '0'), k++;
                if (k == 0 || k > 6) return -1;
                while (k < 6) f *= 10, k++;
                micros = f;
            }
        }
        if (h == 24) return -1;  /* DuckDB reads 24:00:00 as the next midnight */
        if (h > 24 || mi > 59 || s > 59) invalid = 1;
        if (i < n) {
            if (p[i] == 'Z') {
                i++;
            } else if (p[i] == '+' || p[i] == '-') {
                int sign = p[i] == '-' ? -1 : 1, oh, om = 0;
                i++;
                if (i + 2 > n || !two(p + i, &oh)) return -1;
                i += 2;
                if (i < n && p[i] == ':') {
                    if (i + 3 > n || !two(p + i + 1, &om)) return -1;
                    i += 3;
                } else if (i + 2 <= n && p[i] >= '0' && p[i] <= '9') {
                    if (!two(p + i, &om)) return -1;
                    i += 2;
                }
                /* DuckDB takes any two-digit hours and minutes here (+99:99 included) */
                offset = sign * (oh * 3600 + om * 60);
            } else {
                return -1;
            }
        }
        if (i != n) return -1;
    }
    if (invalid) return 0;
    int64_t secs = days_from_civil(year, (unsigned)mo, (unsigned)d) * 86400 + h * 3600 + mi * 60 + s - offset;
    /* DuckDB's epoch(): whole milliseconds / 1e3 plus the microseconds left / 1e6 (floored),
     * which is not always the double nearest the exact value; it is matched bit for bit */
    int64_t all = secs * 1000000 + micros;
    int64_t ms = all >= 0 ? all / 1000 : -((-all + 999) / 1000);
    *out = (double)ms / 1e3 + (double)(all - ms * 1000) / 1e6;
    return 1;
}

/* ------------------------------------------------------------------ UTF-8 */

/* Whether p[0:n] is valid UTF-8 (no overlongs, surrogates or code points past U+10FFFF). */
static int valid_utf8(const uint8_t *p, size_t n) {
    size_t i = 0;
    while (i < n) {
        uint8_t c = p[i];
        if (c < 0x80) { i++; continue; }
        size_t k;
        uint32_t cp;
        if (c >= 0xC2 && c <= 0xDF) { k = 1; cp = c & 0x1F; }
        else if (c >= 0xE0 && c <= 0xEF) { k = 2; cp = c & 0x0F; }
        else if (c >= 0xF0 && c <= 0xF4) { k = 3; cp = c & 0x07; }
        else return 0;
        if (i + k >= n) return 0;
        for (size_t j = 1; j <= k; j++) {
            if ((p[i + j] & 0xC0) != 0x80) return 0;
            cp = (cp << 6) | (p[i + j] & 0x3F);
        }
        if ((k == 2 && cp < 0x800) || (k == 3 && cp < 0x10000) || cp > 0x10FFFF ||
            (cp >= 0xD800 && cp <= 0xDFFF))
            return 0;
        i += k + 1;
    }
    return 1;
}

/* Code points of p[0:n] (valid UTF-8) into out; returns their number. */
static size_t decode(const uint8_t *p, size_t n, uint32_t *out) {
    size_t i = 0, m = 0;
    while (i < n) {
        uint8_t c = p[i];
        if (c < 0x80) { out[m++] = c; i++; }
        else if (c < 0xE0) { out[m++] = ((uint32_t)(c & 0x1F) << 6) | (p[i + 1] & 0x3F); i += 2; }
        else if (c < 0xF0) {
            out[m++] = ((uint32_t)(c & 0x0F) << 12) | ((uint32_t)(p[i + 1] & 0x3F) << 6) | (p[i + 2] & 0x3F);
            i += 3;
        } else {
            out[m++] = ((uint32_t)(c & 0x07) << 18) | ((uint32_t)(p[i + 1] & 0x3F) << 12) |
                       ((uint32_t)(p[i + 2] & 0x3F) << 6) | (p[i + 3] & 0x3F);
            i += 4;
        }
    }
    return m;
}

static size_t count_chars(const uint8_t *p, size_t n) {
    size_t m = 0;
    for (size_t i = 0; i < n; i++) m += (p[i] & 0xC0) != 0x80;
    return m;
}

/* ------------------------------------------------------------------ the reader */

enum { TS_NONE = 0, TS_NUMBER = 1, TS_INSTANT = 2, TS_EITHER = 3 };
enum { CLICK_NUMBER = 0, CLICK_TEXT = 1 };
enum { F_QUERY, F_TS, F_SESSION, F_USER, F_RC, F_CLICK, F_COUNT };

/* Session and user ids are kept as their 64-bit hash (0: none), as the SQL path compares
 * them by DuckDB's hash; a collision is as unlikely on either path. */
typedef struct {
    uint32_t *raw;
    uint64_t *sh, *uh;
    double *ts;
    uint8_t *clk;
    uint32_t fill;
} Block;

typedef struct Scanner Scanner;

typedef struct {
    Scanner *sc;
    int index;
    int64_t begin, end;     /* byte range: the lines starting in it */
    Dict raws;
    Block *blocks;
    size_t nblocks, blocks_cap;
    uint64_t lines, null_queries;
    char why[200];
    int64_t why_offset;
    atomic_llong done;      /* bytes parsed, for progress */
    uint8_t *scratch;
    size_t scratch_cap;
} Worker;

/* Where a query's text lies in the arena of normalised texts. */
typedef struct {
    uint32_t off, len;
} QText;

struct Scanner {
    PyObject_HEAD
    Shared sh;
    char *path;
    int64_t offset, size;
    uint8_t delimiter;
    int quoted, ncols;
    int col[F_COUNT];       /* column index per field, -1 when absent */
    int ts_mode, click_mode, nthreads;
    Worker workers[MAX_THREADS];
    int stage;              /* 0 new, 1 read, 2 foreign, 3 screened, 4 numbered, 5 followed,
                               6 closed */
    char why[240];
    /* after read(): the merged dictionary and flat per-line arrays */
    Dict raws;
    size_t lines;
    Block *blk;                /* every line, in file order; raw becomes the query id */
    size_t nblk;
    uint64_t null_queries;
    /* after foreign()/screen(): normalised text per raw, and distinct normalised texts */
    Dict norms;                /* distinct normalised texts; e[].n etc. summed */
    uint32_t *raw_norm;        /* raw id -> norm id */
    uint8_t *foreign;          /* raw id -> 1 when Python normalises it */
    int casefold, collapse;    /* the normalisation ascii() does */
    size_t round_lines;        /* follow()'s round size (tests make it small) */
    int ascii_done;
    /* after number() */
    size_t nq;
    QText *q_text;             /* query id -> its text in the norms arena */
    uint32_t *q_chars;         /* its length in characters */
    uint32_t *t_start;         /* CSR of the distinct term hashes of each query */
    uint64_t *t_hash;
    size_t nterms;
};

static PyObject *Unsupported;

static void worker_stop(Worker *w, int64_t at, const char *why) {
    if (!w->why[0]) {
        snprintf(w->why, sizeof w->why, "%s", why);
        w->why_offset = at;
    }
    atomic_store(&w->sc->sh.stop, 1);
}

static Block *new_block(Worker *w) {
    Shared *sh = &w->sc->sh;
    if (w->nblocks == w->blocks_cap) {
        size_t cap = w->blocks_cap ? w->blocks_cap * 2 : 16;
        Block *b = realloc(w->blocks, cap * sizeof(Block));
        if (!b) return NULL;
        w->blocks = b;
        w->blocks_cap = cap;
    }
    Block *b = &w->blocks[w->nblocks];
    memset(b, 0, sizeof *b);
    b->raw = bmalloc(sh, BLOCK_LINES * sizeof(uint32_t));
    b->sh = bmalloc(sh, BLOCK_LINES * sizeof(uint64_t));
    b->uh = bmalloc(sh, BLOCK_LINES * sizeof(uint64_t));
    b->ts = bmalloc(sh, BLOCK_LINES * sizeof(double));
    b->clk = bmalloc(sh, BLOCK_LINES);
    if (!b->raw || !b->sh || !b->uh || !b->ts || !b->clk) {
        w->nblocks++;  /* freed with the others */
        return NULL;
    }
    w->nblocks++;
    return b;
}

static void free_block(Shared *sh, Block *b) {
    bfree(sh, b->raw, BLOCK_LINES * sizeof(uint32_t));
    bfree(sh, b->sh, BLOCK_LINES * sizeof(uint64_t));
    bfree(sh, b->uh, BLOCK_LINES * sizeof(uint64_t));
    bfree(sh, b->ts, BLOCK_LINES * sizeof(double));
    bfree(sh, b->clk, BLOCK_LINES);
    memset(b, 0, sizeof *b);
}

typedef struct {
    const uint8_t *p;
    uint32_t n;
    int present;    /* 0: NULL (empty or "") */
    int escaped;    /* doubled quotes to undo */
} FieldRef;

/* Where the next quote or delimiter of a line is: by memchr, or by bit masks of their
 * positions (split_fast). SIZE_MAX or n and past: none. */
typedef struct {
    const uint8_t *p;
    size_t n;
    const uint64_t *dm, *qm;  /* NULL: memchr */
    size_t words;
} Finder;

static inline size_t next_bit(const uint64_t *mask, size_t from, size_t words) {
    size_t w = from >> 6;
    if (w >= words) return SIZE_MAX;
    uint64_t m = mask[w] & (~0ull << (from & 63));
    while (!m && ++w < words) m = mask[w];
    return m ? w * 64 + (size_t)__builtin_ctzll(m) : SIZE_MAX;
}

static inline size_t find_byte(const Finder *f, const uint64_t *mask, uint8_t c, size_t from) {
    if (mask) return next_bit(mask, from, f->words);
    const uint8_t *q = memchr(f->p + from, c, f->n - from);
    return q ? (size_t)(q - f->p) : SIZE_MAX;
}

/* The fields of a line (quoted ones unwrapped, doubled quotes marked to undo); 0 with *why
 * set when the line is not one clean record of the header's number of fields. */
static int split_fields(const Scanner *sc, const Finder *fd, FieldRef *out, const char **why) {
    const uint8_t *p = fd->p;
    size_t n = fd->n, i = 0;
    for (int c = 0; c < sc->ncols; c++) {
        FieldRef f = {p + i, 0, 0, 0};
        if (sc->quoted && i < n && p[i] == '"') {
            size_t j = i + 1;
            for (;;) {
                size_t k = find_byte(fd, fd->qm, '"', j);
                if (k >= n) { *why = "a quoted value left open"; return 0; }
                if (k + 1 < n && p[k + 1] == '"') { f.escaped = 1; j = k + 2; continue; }
                f.p = p + i + 1;
                f.n = (uint32_t)(k - i - 1);
                i = k + 1;
                break;
            }
            if (i < n && p[i] != sc->delimiter) { *why = "text after a closing quote"; return 0; }
        } else {
            size_t k = find_byte(fd, fd->dm, sc->delimiter, i);
            if (k > n) k = n;
            if (sc->quoted && find_byte(fd, fd->qm, '"', i) < k) {
                *why = "a quote inside an unquoted value";
                return 0;
            }
            f.p = p + i;
            f.n = (uint32_t)(k - i);
            i = k;
        }
        f.present = f.n > 0;
        out[c] = f;
        if (c + 1 < sc->ncols) {
            if (i >= n) { *why = "fewer fields than the header"; return 0; }
            i++;  /* the delimiter */
        }
    }
    if (i != n) { *why = "more fields than the header"; return 0; }
    return 1;
}

/* Split one line into its fields; 0 and a reason when it is outside the subset. */
static int split_line(const Scanner *sc, const uint8_t *p, size_t n, FieldRef *out,
                      const char **why) {
    return split_fields(sc, &(Finder){p, n, NULL, NULL, 0}, out, why);
}

static const uint8_t *unescape(Worker *w, FieldRef *f) {
    if (!f->escaped) return f->p;
    if (w->scratch_cap < f->n) {
        free(w->scratch);
        w->scratch_cap = f->n * 2 + 64;
        w->scratch = malloc(w->scratch_cap);
        if (!w->scratch) { w->scratch_cap = 0; return NULL; }
    }
    uint32_t m = 0;
    for (uint32_t i = 0; i < f->n; i++) {
        w->scratch[m++] = f->p[i];
        if (f->p[i] == '"') i++;
    }
    f->n = m;
    return w->scratch;
}

/* Whether a Unicode space separator (Zs) starts p[0:n] / ends it: its length in bytes, or 0. */
static int is_zs(uint32_t cp) {
    return cp == 0x20 || cp == 0xA0 || cp == 0x1680 || (cp >= 0x2000 && cp <= 0x200A) ||
           cp == 0x202F || cp == 0x205F || cp == 0x3000;
}

static size_t zs_at(const uint8_t *p, size_t n) {
    uint32_t cp;
    size_t k;
    if (p[0] < 0x80) { cp = p[0]; k = 1; }
    else if (p[0] < 0xE0) { if (n < 2) return 0; cp = ((uint32_t)(p[0] & 0x1F) << 6) | (p[1] & 0x3F); k = 2; }
    else if (p[0] < 0xF0) {
        if (n < 3) return 0;
        cp = ((uint32_t)(p[0] & 0x0F) << 12) | ((uint32_t)(p[1] & 0x3F) << 6) | (p[2] & 0x3F);
        k = 3;
    } else return 0;
    return is_zs(cp) ? k : 0;
}

static size_t zs_before(const uint8_t *p, size_t n) {
    size_t start = n;
    while (start > 0 && n - start < 4) {
        start--;
        if ((p[start] & 0xC0) != 0x80) break;
    }
    size_t k = zs_at(p + start, n - start);
    return k == n - start ? k : 0;
}

static const char *FALSE_WORDS[] = {"", "false", "f", "no", "n", "none", "null", "nan", "-"};

/* clicked, as annotation/sampling_source.py's _clicked_sql reads a text column:
 * 1 / 0, or -1 undecided. */
static int read_click(int mode, const uint8_t *p, size_t n, int present) {
    if (!present) return 0;
    double v;
    int r = read_number(p, n, &v);
    if (r < 0) return -1;
    if (r == 1) return v > 0;
    if (mode == CLICK_NUMBER) return 0;
    /* lower(trim(text)) NOT IN the "no" words; DuckDB's trim removes the Unicode space
     * separators (category Zs), not tabs */
    size_t a = 0, b = n;
    size_t k;
    while (a < b && (k = zs_at(p + a, b - a))) a += k;
    while (b > a && (k = zs_before(p + a, b - a))) b -= k;
    if (b - a > 5) return 1;
    char word[8];
    for (size_t i = a; i < b; i++) {
        uint8_t c = p[i];
        if (c >= 0x80) return 1;  /* no lower case of other text is one of the words */
        word[i - a] = (char)(c >= 'A' && c <= 'Z' ? c + 32 : c);
    }
    word[b - a] = 0;
    for (size_t w = 0; w < sizeof FALSE_WORDS / sizeof *FALSE_WORDS; w++)
        if (strcmp(word, FALSE_WORDS[w]) == 0) return 0;
    return 1;
}

#define BATCH 32

typedef struct {
    FieldRef f[F_COUNT];
    uint64_t qh, qh2, sh, uh;
    const uint8_t *q;
    int64_t at;
} Pending;

/* Lines go through three stages a batch apart, so that the cache misses of one batch's
 * lookups overlap the work on the others: the hash slots are prefetched, then the entries
 * the slots point at, then the lines are committed (worker_run runs the stages a line of
 * each batch at a time; these whole-batch forms finish the ring when it is flushed). */
static void stage_slots(Worker *w, Pending *batch, int count) {
    for (int i = 0; i < count; i++) {
        Pending *l = &batch[i];
        if (l->f[F_QUERY].present) dict_prefetch(&w->raws, l->qh);
    }
}

static void stage_entries(Worker *w, Pending *batch, int count) {
    for (int i = 0; i < count; i++) {
        Pending *l = &batch[i];
        if (l->f[F_QUERY].present) dict_prefetch_entry(&w->raws, l->qh);
    }
}

/* Commit one line; 0 on a reason to stop. */
static int commit_line(Worker *w, Pending *l) {
    Scanner *sc = w->sc;
    Shared *sh = &sc->sh;
    {
        Block *b = w->nblocks ? &w->blocks[w->nblocks - 1] : NULL;
        if (!b || b->fill == BLOCK_LINES) {
            b = new_block(w);
            if (!b) { worker_stop(w, l->at, MEMORY_REASON); return 0; }
        }
        uint32_t slot = b->fill++;
        /* time */
        double ts = NAN;
        int has_ts = 0;
        int bad_ts = 0;
        if (sc->col[F_TS] >= 0 && l->f[F_TS].present) {
            FieldRef *f = &l->f[F_TS];
            const uint8_t *p = unescape(w, f);
            int r = -1;
            if (!p) { worker_stop(w, l->at, MEMORY_REASON); return 0; }
            if (sc->ts_mode == TS_NUMBER || sc->ts_mode == TS_EITHER) r = read_number(p, f->n, &ts);
            if (sc->ts_mode == TS_INSTANT || (sc->ts_mode == TS_EITHER && r == 0)) r = read_instant(p, f->n, &ts);
            if (r == 0) { bad_ts = 1; r = 1; ts = NAN; }  /* certainly no time: unparsed */
            if (r != 1) { worker_stop(w, l->at, "a timestamp in a form this reader leaves to DuckDB"); return 0; }
            has_ts = !isnan(ts);
        }
        /* result count */
        int rc_known = 0, rc_zero = 0;
        if (sc->col[F_RC] >= 0 && l->f[F_RC].present) {
            FieldRef *f = &l->f[F_RC];
            const uint8_t *p = unescape(w, f);
            if (!p) { worker_stop(w, l->at, MEMORY_REASON); return 0; }
            double v;
            int r = read_number(p, f->n, &v);
            if (r < 0) { worker_stop(w, l->at, "a result count in a form this reader leaves to DuckDB"); return 0; }
            rc_known = r == 1;
            rc_zero = r == 1 && v == 0;
        }
        int clk = 0;
        if (sc->col[F_CLICK] >= 0) {
            FieldRef *f = &l->f[F_CLICK];
            const uint8_t *p = f->present ? unescape(w, f) : f->p;
            if (!p) { worker_stop(w, l->at, MEMORY_REASON); return 0; }
            clk = read_click(sc->click_mode, p, f->n, f->present);
            if (clk < 0) { worker_stop(w, l->at, "a clicked value in a form this reader leaves to DuckDB"); return 0; }
        }
        uint32_t r = NONE;
        if (l->f[F_QUERY].present) {
            r = dict_get2(sh, &w->raws, l->q, l->f[F_QUERY].n, l->qh, l->qh2);
            if (r == NONE) { worker_stop(w, l->at, MEMORY_REASON); return 0; }
            Entry *e = &w->raws.e[r];
            e->n++;
            e->rc_n += rc_known;
            e->zero_n += rc_zero;
            e->bad_ts += bad_ts;
            if (has_ts && (isnan(e->max_ts) || ts > e->max_ts)) e->max_ts = ts;
        } else {
            w->null_queries++;
        }
        b->raw[slot] = r;
        b->sh[slot] = l->sh;
        b->uh[slot] = l->uh;
        b->ts[slot] = has_ts ? ts : NAN;
        b->clk[slot] = (uint8_t)clk;
        w->lines++;
    }
    return 1;
}

/* Commit the lines of one batch; 0 on a reason to stop. */
static int commit_batch(Worker *w, Pending *batch, int count) {
    for (int i = 0; i < count; i++)
        if (!commit_line(w, &batch[i])) return 0;
    return 1;
}


#ifdef __SSE2__
/* Lines up to this long are split by bit masks of their delimiters and quotes, built 16
 * bytes at a time (with the NUL, CR and high-bit tests of scan_bytes in the same pass);
 * longer ones by split_line. Reading a line's last 16-byte chunk whole may read up to 15
 * bytes past it: the read buffer keeps that much slack. */
#define FAST_LINE 256
#define CHUNK_SLACK 16

/* split_line's fields and reasons, and scan_bytes' flags, for a line of at most FAST_LINE
 * bytes. Returns 0 with *why set on a reason to stop (NUL or CR: *bad instead). */
static int split_fast(const Scanner *sc, const uint8_t *p, size_t n, FieldRef *out,
                      const char **why, int *high, int *bad) {
    uint64_t dm[FAST_LINE / 64] = {0}, qm[FAST_LINE / 64] = {0};
    const __m128i delim = _mm_set1_epi8((char)sc->delimiter), quote = _mm_set1_epi8('"');
    const __m128i zero = _mm_setzero_si128(), cr = _mm_set1_epi8('\r');
    unsigned hi = 0, nul = 0;
    for (size_t k = 0; k < n; k += 16) {
        __m128i v = _mm_loadu_si128((const __m128i *)(p + k));
        unsigned valid = n - k >= 16 ? 0xffffu : (1u << (n - k)) - 1;
        unsigned d = (unsigned)_mm_movemask_epi8(_mm_cmpeq_epi8(v, delim)) & valid;
        unsigned q = (unsigned)_mm_movemask_epi8(_mm_cmpeq_epi8(v, quote)) & valid;
        hi |= (unsigned)_mm_movemask_epi8(v) & valid;
        nul |= (unsigned)_mm_movemask_epi8(_mm_or_si128(_mm_cmpeq_epi8(v, zero), _mm_cmpeq_epi8(v, cr))) & valid;
        dm[k >> 6] |= (uint64_t)d << (k & 63);
        qm[k >> 6] |= (uint64_t)q << (k & 63);
    }
    *high = hi != 0;
    *bad = nul != 0;
    if (*bad) return 0;
    return split_fields(sc, &(Finder){p, n, dm, qm, (n + 63) / 64}, out, why);
}
#else
#define CHUNK_SLACK 0
#endif

/* Hash a field that is present, undoing doubled quotes into a private copy when needed. */
static int prepare(Worker *w, Pending *l, uint8_t **own, size_t *own_cap) {
    Scanner *sc = w->sc;
    FieldRef *q = &l->f[F_QUERY];
    l->q = q->p;
    if (q->present && q->escaped) {
        /* the scratch buffer is shared by the batch: keep an own copy per line */
        if (*own_cap < q->n) {
            free(*own);
            *own_cap = q->n * 2 + 64;
            *own = malloc(*own_cap);
            if (!*own) return 0;
        }
        uint32_t m = 0;
        for (uint32_t i = 0; i < q->n; i++) {
            (*own)[m++] = q->p[i];
            if (q->p[i] == '"') i++;
        }
        q->n = m;
        q->escaped = 0;
        l->q = *own;
        q->p = *own;
    }
    if (q->present) l->qh = hash_pair_padded(l->q, q->n, &l->qh2);
    l->sh = l->uh = 0;
    int ids[2] = {F_SESSION, F_USER};
    for (int k = 0; k < 2; k++) {
        FieldRef *f = &l->f[ids[k]];
        if (sc->col[ids[k]] < 0 || !f->present) continue;
        const uint8_t *p = f->p;
        uint32_t n = f->n;
        uint8_t tmp[256 + SLACK];
        if (f->escaped) {
            if (n > sizeof tmp - SLACK) return -1;
            uint32_t m = 0;
            for (uint32_t i = 0; i < n; i++) {
                tmp[m++] = p[i];
                if (p[i] == '"') i++;
            }
            p = tmp;
            n = m;
        }
        uint64_t h = hash_padded(p, n);
        if (k == 0) l->sh = h; else l->uh = h;
    }
    return 1;
}

/* Whether p[0:n] holds a byte past ASCII (*high) or a NUL or CR (*bad), 8 bytes at a time. */
static inline void scan_bytes(const uint8_t *p, size_t n, int *high, int *bad) {
    const uint64_t ones = 0x0101010101010101ull, tops = 0x8080808080808080ull;
    uint64_t hi = 0, zero = 0;
    size_t k = 0;
    for (; k + 8 <= n; k += 8) {
        uint64_t v;
        memcpy(&v, p + k, 8);
        uint64_t cr = v ^ (ones * '\r');
        hi |= v;
        zero |= ((v - ones) & ~v) | ((cr - ones) & ~cr);
    }
    for (; k < n; k++) {
        hi |= p[k];
        zero |= (p[k] == 0 || p[k] == '\r') ? tops : 0;
    }
    *high = (hi & tops) != 0;
    *bad = (zero & tops) != 0;
}

/* Commit every pending batch, oldest first. */
static int flush_ring(Worker *w, Pending ring[3][BATCH], int counts[3], int head) {
    for (int k = 1; k <= 3; k++) {
        int r = (head + k) % 3;  /* head+1 is the oldest, head itself the newest */
        if (!counts[r]) continue;
        if (r == head) {
            stage_slots(w, ring[r], counts[r]);
            stage_entries(w, ring[r], counts[r]);
        }
        int ok = commit_batch(w, ring[r], counts[r]);
        counts[r] = 0;
        if (!ok) return 0;
    }
    return 1;
}

static void *worker_run(void *arg) {
    Worker *w = arg;
    Scanner *sc = w->sc;
    Shared *sh = &sc->sh;
    int fd = open(sc->path, O_RDONLY);
    if (fd < 0) { worker_stop(w, w->begin, "cannot open the file"); return NULL; }
    uint8_t *buf = malloc(READ_BYTES + SLACK + CHUNK_SLACK);
    uint8_t *owns[3][BATCH] = {{0}};
    size_t own_caps[3][BATCH] = {{0}};
    if (!buf) { close(fd); worker_stop(w, w->begin, MEMORY_REASON); return NULL; }
    int64_t pos = w->begin;   /* file offset of buf[0] */
    size_t have = 0, at = 0;
    int eof = 0;
    /* A range that starts inside a line skips to the next line start: that line belongs
     * to the range before. */
    int skip_partial = w->index > 0;
    if (skip_partial) {
        /* look at the byte before the range: a line starts at begin iff it is a LF */
        uint8_t prev;
        if (pread(fd, &prev, 1, w->begin - 1) == 1 && prev == '\n') skip_partial = 0;
    }
    Pending ring[3][BATCH];
    int counts[3] = {0, 0, 0};
    int head = 0;   /* the batch being filled; head-1 and head-2 (mod 3) are older */
    int64_t next_report = 0;
    for (;;) {
        if (atomic_load(&sh->stop)) break;
        /* find the next line in the buffer, refilling as needed */
        uint8_t *nl = have > at ? memchr(buf + at, '\n', have - at) : NULL;
        if (!nl && !eof) {
            /* the batches point into the buffer: finish them first */
            if (!flush_ring(w, ring, counts, head)) break;
            memmove(buf, buf + at, have - at);
            pos += (int64_t)at;
            have -= at;
            at = 0;
            if (have == READ_BYTES) { worker_stop(w, pos, "a line longer than 16 MB"); break; }
            int64_t limit = sc->size - (pos + (int64_t)have);
            size_t want = READ_BYTES - have;
            if ((int64_t)want > limit) want = (size_t)limit;
            ssize_t got = want ? pread(fd, buf + have, want, pos + (int64_t)have) : 0;
            if (got < 0) { worker_stop(w, pos, "a read error"); break; }
            have += (size_t)got;
            if (got == 0 || pos + (int64_t)have >= sc->size) eof = 1;
            continue;
        }
        size_t start = at;
        size_t stop = nl ? (size_t)(nl - buf) : have;
        if (!nl && start == stop) break;  /* end of file */
        int64_t line_at = pos + (int64_t)start;
        if (line_at >= w->end && !skip_partial) break;
        at = nl ? stop + 1 : have;
        if (skip_partial) { skip_partial = 0; continue; }
        size_t n = stop - start;
        const uint8_t *p = buf + start;
        /* DuckDB's CSV reader rejects a line of 2,000,000 bytes or more (its maximum line
         * size); a byte earlier, CR included, this reader gives way */
        if (n >= MAX_LINE) { worker_stop(w, line_at, "a line of two million bytes or more"); break; }
        if (n && p[n - 1] == '\r') n--;
        if (n == 0) { worker_stop(w, line_at, "a blank line"); break; }
        /* NUL, a stray CR and bytes past ASCII (then validated as UTF-8), then the fields */
        int high = 0, bad = 0, split = -1;
        FieldRef fields[MAX_COLUMNS];
        const char *why = NULL;
#ifdef __SSE2__
        if (n <= FAST_LINE) split = split_fast(sc, p, n, fields, &why, &high, &bad);
        else scan_bytes(p, n, &high, &bad);
#else
        scan_bytes(p, n, &high, &bad);
#endif
        if (bad) { worker_stop(w, line_at, "a NUL character or a lone carriage return"); break; }
        if (high && !valid_utf8(p, n)) { worker_stop(w, line_at, "invalid UTF-8"); break; }
        if (split < 0) split = split_line(sc, p, n, fields, &why);
        if (!split) { worker_stop(w, line_at, why); break; }
        Pending *l = &ring[head][counts[head]];
        for (int f = 0; f < F_COUNT; f++) {
            if (sc->col[f] >= 0) l->f[f] = fields[sc->col[f]];
            else memset(&l->f[f], 0, sizeof(FieldRef));
        }
        l->at = line_at;
        int ok = prepare(w, l, &owns[head][counts[head]], &own_caps[head][counts[head]]);
        if (ok <= 0) { worker_stop(w, line_at, ok < 0 ? "an id longer than 256 bytes with quotes" : MEMORY_REASON); break; }
        if (++counts[head] == BATCH) {
            /* the three stages side by side, a line of each at a time: bursts of a batch's
             * prefetches would wait for the memory's few outstanding misses */
            int middle = (head + 2) % 3, oldest = (head + 1) % 3, ok = 1;
            for (int i = 0; i < BATCH && ok; i++) {
                const Pending *fresh = &ring[head][i], *mid = &ring[middle][i];
                if (fresh->f[F_QUERY].present) dict_prefetch(&w->raws, fresh->qh);
                if (i < counts[middle] && mid->f[F_QUERY].present) dict_prefetch_entry(&w->raws, mid->qh);
                if (i < counts[oldest]) ok = commit_line(w, &ring[oldest][i]);
            }
            if (!ok) break;
            counts[oldest] = 0;
            head = oldest;
        }
        if (line_at >= next_report) {
            atomic_store(&w->done, (long long)(line_at - w->begin));
            next_report = line_at + (1 << 22);
        }
    }
    if (!atomic_load(&sh->stop)) flush_ring(w, ring, counts, head);
    for (int r = 0; r < 3; r++)
        for (int i = 0; i < BATCH; i++) free(owns[r][i]);
    free(buf);
    free(w->scratch);
    w->scratch = NULL;
    close(fd);
    return NULL;
}

/* ------------------------------------------------------------------ read() */

typedef struct {
    Scanner *sc;
    Worker *w;
    uint32_t *rmap;
    int ok;
} RawMerge;

/* Worker w's raw strings into the global dictionary, their sums added up. */
static void *merge_raws(void *arg) {
    RawMerge *m = arg;
    Shared *sh = &m->sc->sh;
    Worker *w = m->w;
    Dict *into = &m->sc->raws;
    m->ok = 0;
    for (size_t i = 0; i < w->raws.count; i++) {
        /* the slots and then the entries of the lookups ahead are fetched meanwhile */
        if (i + 32 < w->raws.count) dict_prefetch(into, w->raws.e[i + 32].h);
        if (i + 16 < w->raws.count) dict_prefetch_entry(into, w->raws.e[i + 16].h);
        Entry *e = &w->raws.e[i];
        uint32_t g = dict_get2(sh, into, w->raws.arena + e->off, e->len, e->h, e->h2);
        if (g == NONE) return NULL;
        add_sums(&into->e[g], e);
        m->rmap[i] = g;
    }
    m->ok = 1;
    return m;
}

typedef struct {
    Block *blocks;
    size_t from, to;
    const uint32_t *rmap;
} Remap;

/* Local raw ids to global ones in blocks [from, to); a part-full last block is padded with
 * lines that have no query, session or user, so that every block is whole. */
static void *remap_blocks(void *arg) {
    Remap *r = arg;
    for (size_t b = r->from; b < r->to; b++) {
        Block *B = &r->blocks[b];
        if (!B->raw) continue;
        for (uint32_t i = 0; r->rmap && i < B->fill; i++) {
            if (B->raw[i] != NONE) B->raw[i] = r->rmap[B->raw[i]];
        }
        for (uint32_t i = B->fill; i < BLOCK_LINES; i++) {
            B->raw[i] = NONE;
            B->sh[i] = 0;
            B->uh[i] = 0;
        }
    }
    return NULL;
}

static void run_two(int threads, void *(*a)(void *), void *x, void *(*b)(void *), void *y) {
    pthread_t th;
    int threaded = threads > 1 && pthread_create(&th, NULL, b, y) == 0;
    a(x);
    if (threaded) pthread_join(th, NULL);
    else b(y);
}

static int merge_workers(Scanner *sc, int nw) {
    Shared *sh = &sc->sh;
    Worker *w0 = &sc->workers[0];
    sc->raws = w0->raws;
    memset(&w0->raws, 0, sizeof w0->raws);
    int ok = 1;
    uint32_t *rmaps[MAX_THREADS] = {0};
    for (int t = 1; t < nw && ok; t++) {
        Worker *w = &sc->workers[t];
        RawMerge raws = {sc, w, rmaps[t] = malloc((w->raws.count + 1) * sizeof(uint32_t)), 0};
        ok = raws.rmap && merge_raws(&raws);
        dict_free(sh, &w->raws);
    }
    size_t nblk = 0;
    for (int t = 0; t < nw; t++) nblk += sc->workers[t].nblocks;
    sc->blk = calloc(nblk ? nblk : 1, sizeof(Block));
    ok = ok && sc->blk;
    for (int t = 0; t < nw; t++) {
        Worker *w = &sc->workers[t];
        if (ok) {
            /* each worker's blocks in two halves, on two threads */
            Remap r = {w->blocks, 0, w->nblocks / 2, rmaps[t]};
            Remap q = r;
            r.to = q.from = w->nblocks / 2;
            q.to = w->nblocks;
            run_two(nw, remap_blocks, &r, remap_blocks, &q);
            for (size_t b = 0; b < w->nblocks; b++) sc->blk[sc->nblk++] = w->blocks[b];
            free(w->blocks);
            w->blocks = NULL;
            w->nblocks = 0;
        }
        free(rmaps[t]);
        sc->lines += w->lines;
        sc->null_queries += w->null_queries;
    }
    return ok;
}

/* The reason of the worker that stopped earliest in the file; its byte offset. */
static int64_t set_why_from_workers(Scanner *sc, int nw) {
    int64_t best = -1;
    for (int t = 0; t < nw; t++) {
        Worker *w = &sc->workers[t];
        if (w->why[0] && (best < 0 || w->why_offset < best)) {
            best = w->why_offset;
            snprintf(sc->why, sizeof sc->why, "%s", w->why);
        }
    }
    if (!sc->why[0]) snprintf(sc->why, sizeof sc->why, "stopped");
    return best;
}

static PyObject *unsupported(Scanner *sc, int64_t at) {
    PyObject *args = Py_BuildValue("(sL)", sc->why, (long long)at);
    if (args) {
        PyErr_SetObject(Unsupported, args);
        Py_DECREF(args);
    }
    return NULL;
}

/* Memory ran out (the budget or the machine's) at byte offset at, or -1 past the reading:
 * the log goes to DuckDB, which spills to disk. */
static PyObject *out_of_memory(Scanner *sc, int64_t at) {
    snprintf(sc->why, sizeof sc->why, "%s", MEMORY_REASON);
    return unsupported(sc, at);
}

static PyObject *Scanner_read(Scanner *sc, PyObject *unused) {
    if (sc->stage != 0) return PyErr_Format(PyExc_RuntimeError, "read() runs once");
    sc->stage = 1;
    int nw = sc->nthreads;
    int64_t span = sc->size - sc->offset;
    if (span < (int64_t)nw * (1 << 20)) nw = 1;  /* small files: one thread */
    int ok = 1;
    for (int t = 0; t < nw; t++) {
        Worker *w = &sc->workers[t];
        memset(w, 0, sizeof *w);
        w->sc = sc;
        w->index = t;
        w->begin = sc->offset + span * t / nw;
        w->end = t + 1 == nw ? sc->size : sc->offset + span * (t + 1) / nw;
        /* the dictionary sized for the range (a line is rarely under 16 bytes) so that it
         * seldom grows, and never past 2^20 slots before it has to */
        unsigned bits = 12;
        while (bits < 20 && ((int64_t)1 << bits) < (w->end - w->begin) / 64) bits++;
        if (!dict_init(&sc->sh, &w->raws, bits)) ok = 0;
    }
    if (!ok) {
        return out_of_memory(sc, sc->offset);
    }
    Py_BEGIN_ALLOW_THREADS
    pthread_t th[MAX_THREADS];
    int started[MAX_THREADS] = {0};
    for (int t = 1; t < nw; t++) started[t] = pthread_create(&th[t], NULL, worker_run, &sc->workers[t]) == 0;
    worker_run(&sc->workers[0]);
    for (int t = 1; t < nw; t++) {
        if (started[t]) pthread_join(th[t], NULL);
        else { worker_stop(&sc->workers[t], sc->workers[t].begin, "cannot start a thread"); }
    }
    if (!atomic_load(&sc->sh.stop)) ok = merge_workers(sc, nw);
    Py_END_ALLOW_THREADS
    if (!atomic_load(&sc->sh.stop) && !ok) return out_of_memory(sc, -1);  /* merging: no line */
    if (atomic_load(&sc->sh.stop)) return unsupported(sc, set_why_from_workers(sc, nw));
    Py_RETURN_NONE;
}

/* ------------------------------------------------------------------ normalising */

static inline int ascii_space(uint8_t c) {
    return c == ' ' || (c >= '\t' && c <= '\r') || (c >= 0x1c && c <= 0x1f);
}

/* Python's normalise_query on ASCII text: NFKC is the identity, casefold is lower, and
 * str.split() splits at exactly these whitespace characters. */
static size_t normalise_ascii(const uint8_t *p, size_t n, uint8_t *out, int casefold, int collapse) {
    size_t m = 0;
    if (!collapse) {
        for (size_t i = 0; i < n; i++) {
            uint8_t c = p[i];
            out[m++] = casefold && c >= 'A' && c <= 'Z' ? c + 32 : c;
        }
        return m;
    }
    size_t i = 0;
    while (i < n) {
        while (i < n && ascii_space(p[i])) i++;
        if (i == n) break;
        if (m) out[m++] = ' ';
        while (i < n && !ascii_space(p[i])) {
            uint8_t c = p[i++];
            out[m++] = casefold && c >= 'A' && c <= 'Z' ? c + 32 : c;
        }
    }
    return m;
}

/* Normalised texts are told apart like raw strings, by two hashes and their length. */
static uint32_t norm_get(Scanner *sc, const uint8_t *text, size_t n) {
    uint64_t h2, h = hash_pair(text, n, &h2);
    return dict_get2(&sc->sh, &sc->norms, text, (uint32_t)n, h, h2);
}

static int add_norm(Scanner *sc, uint32_t raw, const uint8_t *text, size_t n) {
    uint32_t id = norm_get(sc, text, n);
    if (id == NONE) return 0;
    add_sums(&sc->norms.e[id], &sc->raws.e[raw]);
    sc->raw_norm[raw] = id;
    return 1;
}

/* A normalised ASCII text waiting in foreign()'s batch. */
typedef struct {
    uint32_t raw, len;
    size_t at;           /* in the batch's buffer */
    uint64_t h, h2;
} NormItem;

#define NORM_BATCH 64

/* Add a batch of normalised texts, their slots then their entries fetched for all of them
 * first (a lookup at a time would wait for each miss in turn). */
static int add_norms(Scanner *sc, const NormItem *items, int count, const uint8_t *buf) {
    for (int i = 0; i < count; i++) dict_prefetch(&sc->norms, items[i].h);
    for (int i = 0; i < count; i++) dict_prefetch_entry(&sc->norms, items[i].h);
    for (int i = 0; i < count; i++) {
        const NormItem *it = &items[i];
        uint32_t id = dict_get2(&sc->sh, &sc->norms, buf + it->at, it->len, it->h, it->h2);
        if (id == NONE) return 0;
        add_sums(&sc->norms.e[id], &sc->raws.e[it->raw]);
        sc->raw_norm[it->raw] = id;
    }
    return 1;
}

/* foreign(casefold, collapse): the raw strings past ASCII, [(raw id, text)], for Python to
 * normalise; ascii() normalises the others meanwhile. */
static PyObject *Scanner_foreign(Scanner *sc, PyObject *args) {
    int casefold, collapse;
    if (!PyArg_ParseTuple(args, "pp", &casefold, &collapse)) return NULL;
    if (sc->stage != 1) return PyErr_Format(PyExc_RuntimeError, "foreign() runs after read()");
    sc->stage = 2;
    sc->casefold = casefold;
    sc->collapse = collapse;
    size_t nr = sc->raws.count;
    sc->raw_norm = bmalloc(&sc->sh, (nr + 1) * sizeof(uint32_t));
    sc->foreign = bcalloc(&sc->sh, nr + 1, 1);
    unsigned bits = 16;
    while (((size_t)1 << (bits - 1)) < nr && bits < 31) bits++;
    if (!sc->raw_norm || !sc->foreign || !dict_init(&sc->sh, &sc->norms, bits)) {
        return out_of_memory(sc, -1);
    }
    size_t nforeign = 0;
    Py_BEGIN_ALLOW_THREADS
    for (size_t r = 0; r < nr; r++) {
        Entry *e = &sc->raws.e[r];
        const uint8_t *p = sc->raws.arena + e->off;
        int high = 0;
        for (uint32_t k = 0; k < e->len; k++) high |= p[k] & 0x80;
        sc->foreign[r] = high != 0;
        sc->raw_norm[r] = NONE;
        nforeign += high != 0;
    }
    Py_END_ALLOW_THREADS
    PyObject *list = PyList_New((Py_ssize_t)nforeign);
    if (!list) return NULL;
    Py_ssize_t k = 0;
    for (size_t r = 0; r < nr; r++) {
        if (!sc->foreign[r]) continue;
        Entry *e = &sc->raws.e[r];
        PyObject *item = Py_BuildValue("(ns#)", (Py_ssize_t)r, (const char *)sc->raws.arena + e->off, (Py_ssize_t)e->len);
        if (!item) { Py_DECREF(list); return NULL; }
        PyList_SET_ITEM(list, k++, item);
    }
    return list;
}

/* ascii(): the ASCII raw strings normalised here, in batches, without the GIL (Python
 * normalises the foreign ones meanwhile; nothing else may run on the scanner then). */
static PyObject *Scanner_ascii(Scanner *sc, PyObject *unused) {
    if (sc->stage != 2 || sc->ascii_done) return PyErr_Format(PyExc_RuntimeError, "ascii() runs once, after foreign()");
    sc->ascii_done = 1;
    size_t nr = sc->raws.count;
    int ok = 1;
    Py_BEGIN_ALLOW_THREADS
    uint8_t *buf = NULL;
    size_t cap = 0, used = 0;
    NormItem batch[NORM_BATCH];
    int count = 0;
    for (size_t r = 0; r < nr && ok; r++) {
        if (sc->foreign[r]) continue;
        Entry *e = &sc->raws.e[r];
        const uint8_t *p = sc->raws.arena + e->off;
        if (cap < used + e->len + 1) {
            cap = (used + e->len) * 2 + 4096;
            uint8_t *more = realloc(buf, cap);
            if (!more) { ok = 0; break; }
            buf = more;
        }
        NormItem *it = &batch[count++];
        it->raw = (uint32_t)r;
        it->at = used;
        it->len = (uint32_t)normalise_ascii(p, e->len, buf + used, sc->casefold, sc->collapse);
        it->h = hash_pair_padded(buf + used, it->len, &it->h2);
        used += it->len;
        if (count == NORM_BATCH) {
            ok = add_norms(sc, batch, count, buf);
            count = 0;
            used = 0;
        }
    }
    if (ok && count) ok = add_norms(sc, batch, count, buf);
    free(buf);
    Py_END_ALLOW_THREADS
    if (!ok) {
        return out_of_memory(sc, -1);
    }
    Py_RETURN_NONE;
}

/* set_norms([(raw id, normalised text), ...]) for the strings foreign() returned. */
static PyObject *Scanner_set_norms(Scanner *sc, PyObject *items) {
    if (sc->stage != 2) return PyErr_Format(PyExc_RuntimeError, "set_norms() runs after foreign()");
    PyObject *seq = PySequence_Fast(items, "a list of (id, text)");
    if (!seq) return NULL;
    Py_ssize_t n = PySequence_Fast_GET_SIZE(seq);
    for (Py_ssize_t i = 0; i < n; i++) {
        PyObject *item = PySequence_Fast_GET_ITEM(seq, i);
        Py_ssize_t raw, len;
        const char *text;
        if (!PyArg_ParseTuple(item, "ns#", &raw, &text, &len)) { Py_DECREF(seq); return NULL; }
        if (raw < 0 || (size_t)raw >= sc->raws.count || !sc->foreign[raw]) {
            Py_DECREF(seq);
            return PyErr_Format(PyExc_ValueError, "raw id %zd is not a foreign string", raw);
        }
        if (!add_norm(sc, (uint32_t)raw, (const uint8_t *)text, (size_t)len)) {
            Py_DECREF(seq);
            return out_of_memory(sc, -1);
        }
        sc->foreign[raw] = 0;
    }
    Py_DECREF(seq);
    Py_RETURN_NONE;
}

/* The normalised texts the privacy screen must see: [(norm id, text, lines)]. Every
 * pattern of annotation/sampling_text.py needs a digit, "@" or "=". */
static PyObject *Scanner_screen(Scanner *sc, PyObject *unused) {
    if (sc->stage != 2 || !sc->ascii_done) return PyErr_Format(PyExc_RuntimeError, "screen() runs after ascii() and set_norms()");
    for (size_t r = 0; r < sc->raws.count; r++)
        if (sc->foreign[r]) return PyErr_Format(PyExc_RuntimeError, "raw %zu was not normalised", r);
    sc->stage = 3;
    /* raw strings are now their normalised texts' (raw_norm): their dictionary can go */
    size_t nraws = sc->raws.count;
    dict_free(&sc->sh, &sc->raws);
    sc->raws.count = nraws;
    PyObject *list = PyList_New(0);
    if (!list) return NULL;
    for (size_t i = 0; i < sc->norms.count; i++) {
        Entry *e = &sc->norms.e[i];
        const uint8_t *p = sc->norms.arena + e->off;
        int need = 0;
        for (uint32_t k = 0; k < e->len && !need; k++) {
            uint8_t c = p[k];
            need = (c >= '0' && c <= '9') || c == '@' || c == '=';
        }
        if (!need) continue;
        PyObject *item = Py_BuildValue("(ns#K)", (Py_ssize_t)i, (const char *)p, (Py_ssize_t)e->len, (unsigned long long)e->n);
        if (!item || PyList_Append(list, item) < 0) { Py_XDECREF(item); Py_DECREF(list); return NULL; }
        Py_DECREF(item);
    }
    return list;
}

/* ------------------------------------------------------------------ number() */

typedef struct {
    uint64_t key, key2;  /* bytes 0-7 and 8-15, big-endian: byte order is text order */
    uint32_t ent;
} SortKey;

/* The dictionary comes as qsort_r's argument, not a global: two ingestions may run at once
 * in one process (the GIL is released). */
static int cmp_text(const void *a, const void *b, void *dict) {
    const Dict *sort_dict = dict;
    const SortKey *x = a, *y = b;
    if (x->key != y->key) return x->key < y->key ? -1 : 1;
    if (x->key2 != y->key2) return x->key2 < y->key2 ? -1 : 1;
    const Entry *ex = &sort_dict->e[x->ent], *ey = &sort_dict->e[y->ent];
    uint32_t n = ex->len < ey->len ? ex->len : ey->len;
    int c = memcmp(sort_dict->arena + ex->off, sort_dict->arena + ey->off, n);
    if (c) return c;
    return ex->len < ey->len ? -1 : ex->len > ey->len;
}

static uint64_t prefix_key(const uint8_t *p, uint32_t n) {
    uint64_t k = 0;
    for (int i = 0; i < 8; i++) k = (k << 8) | (i < (int)n ? p[i] : 0);
    return k;
}

/* LSD radix sort of the keys by their 64-bit prefix (scratch: room for n keys), then ties
 * (prefixes equal, both texts at least 8 bytes) ordered by the whole text. */
static void sort_texts(SortKey *keys, size_t n, const Dict *d, SortKey *scratch) {
    SortKey *src = keys, *dst = scratch;
    for (int pass = 0; pass < 8; pass++) {
        int shift = pass * 8;
        size_t count[257] = {0};
        for (size_t i = 0; i < n; i++) count[((src[i].key >> shift) & 0xff) + 1]++;
        if (n && count[1 + ((src[0].key >> shift) & 0xff)] == n) continue;  /* one bucket */
        for (int b = 0; b < 256; b++) count[b + 1] += count[b];
        for (size_t i = 0; i < n; i++) dst[count[(src[i].key >> shift) & 0xff]++] = src[i];
        SortKey *t = src; src = dst; dst = t;
    }
    if (src != keys) memcpy(keys, src, n * sizeof(SortKey));
    for (size_t i = 0; i < n;) {
        size_t j = i + 1;
        while (j < n && keys[j].key == keys[i].key) j++;
        if (j - i > 1) qsort_r(keys + i, j - i, sizeof(SortKey), cmp_text, (void *)d);
        i = j;
    }
}

typedef struct {
    SortKey *keys, *scratch;
    size_t n;
    const Dict *d;
} SortJob;

static void *sort_job(void *arg) {
    SortJob *job = arg;
    sort_texts(job->keys, job->n, job->d, job->scratch);
    return NULL;
}

/* sort_texts on two threads: the keys split by their first byte into two runs of about
 * equal size (every key of the first run sorts before every key of the second), each
 * sorted in the copy with its part of the original as scratch. */
static int sort_texts_two(SortKey *keys, size_t n, const Dict *d, int threads) {
    SortKey *tmp = malloc((n ? n : 1) * sizeof(SortKey));
    if (!tmp) return 0;
    if (threads < 2 || n < 4096) {
        sort_texts(keys, n, d, tmp);
        free(tmp);
        return 1;
    }
    size_t count[257] = {0};
    for (size_t i = 0; i < n; i++) count[(keys[i].key >> 56) + 1]++;
    for (int b = 0; b < 256; b++) count[b + 1] += count[b];
    int split = 0;
    while (split < 256 && count[split + 1] <= n / 2) split++;
    size_t first = count[split];  /* keys whose first byte is below split */
    size_t lo = 0, hi = first;
    for (size_t i = 0; i < n; i++) {
        if ((keys[i].key >> 56) < (uint64_t)split) tmp[lo++] = keys[i];
        else tmp[hi++] = keys[i];
    }
    SortJob a = {tmp, keys, first, d}, b = {tmp + first, keys + first, n - first, d};
    run_two(threads, sort_job, &a, sort_job, &b);
    memcpy(keys, tmp, n * sizeof(SortKey));
    free(tmp);
    return 1;
}

static int cmp_u64(const void *a, const void *b) {
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
    return x < y ? -1 : x > y;
}

static PyObject *bytes_of(const void *p, size_t n) {
    return PyBytes_FromStringAndSize((const char *)p, (Py_ssize_t)n);
}

/* number()'s work on the entries [from, to) of the normalised texts. */
typedef struct {
    Scanner *sc;
    const uint32_t *qid;  /* entry -> query id, NONE when it is no query */
    size_t from, to;
    uint64_t *th;         /* the term hashes, once counted */
} TermJob;

/* Each query's text and length in characters; its number of terms in t_start[q + 1]. */
static void *count_terms(void *arg) {
    TermJob *job = arg;
    Scanner *sc = job->sc;
    for (size_t i = job->from; i < job->to; i++) {
        uint32_t q = job->qid[i];
        if (q == NONE) continue;
        const Entry *e = &sc->norms.e[i];
        const uint8_t *p = sc->norms.arena + e->off;
        sc->q_text[q] = (QText){e->off, e->len};
        sc->q_chars[q] = (uint32_t)count_chars(p, e->len);
        uint32_t terms = 0;
        for (uint32_t k = 0; k < e->len; k++) terms += p[k] != ' ' && (k == 0 || p[k - 1] == ' ');
        sc->t_start[q + 1] = terms;
    }
    return NULL;
}

/* Each query's term hashes at t_start[q], sorted (a repeated term may stay twice: only
 * equality is asked). */
static void *hash_terms(void *arg) {
    TermJob *job = arg;
    Scanner *sc = job->sc;
    uint64_t *th = job->th;
    for (size_t i = job->from; i < job->to; i++) {
        uint32_t q = job->qid[i];
        if (q == NONE) continue;
        const Entry *e = &sc->norms.e[i];
        const uint8_t *p = sc->norms.arena + e->off;
        uint32_t at = sc->t_start[q], first = at;
        for (uint32_t k = 0; k < e->len;) {
            uint32_t j = k;
            while (j < e->len && p[j] != ' ') j++;
            if (j > k) th[at++] = hash_padded(p + k, j - k);
            k = j + 1;
        }
        if (at - first > 16) {
            qsort(th + first, at - first, 8, cmp_u64);
        } else {
            for (uint32_t k = first + 1; k < at; k++) {  /* a query has few terms */
                uint64_t x = th[k];
                uint32_t j = k;
                while (j > first && th[j - 1] > x) { th[j] = th[j - 1]; j--; }
                th[j] = x;
            }
        }
    }
    return NULL;
}

/* number([(norm id, kind rank, masked text), ...], exclude): queries in text order. */
static PyObject *Scanner_number(Scanner *sc, PyObject *args) {
    PyObject *flagged;
    int exclude;
    if (!PyArg_ParseTuple(args, "Op", &flagged, &exclude)) return NULL;
    if (sc->stage != 3) return PyErr_Format(PyExc_RuntimeError, "number() runs after screen()");
    sc->stage = 4;
    Shared *sh = &sc->sh;
    size_t nn0 = sc->norms.count;
    /* group_of[norm] = the norms entry whose text is the query kept for it */
    uint32_t *group_of = malloc((nn0 + 1) * sizeof(uint32_t));
    uint8_t *kind = malloc(nn0 + 1);
    if (!group_of || !kind) { free(group_of); free(kind); return out_of_memory(sc, -1); }
    for (size_t i = 0; i < nn0; i++) { group_of[i] = (uint32_t)i; kind[i] = 0; }
    PyObject *seq = PySequence_Fast(flagged, "a list of (id, kind, masked)");
    if (!seq) { free(group_of); free(kind); return NULL; }
    Py_ssize_t nf = PySequence_Fast_GET_SIZE(seq);
    for (Py_ssize_t i = 0; i < nf; i++) {
        Py_ssize_t id, len;
        int k;
        const char *text;
        if (!PyArg_ParseTuple(PySequence_Fast_GET_ITEM(seq, i), "nis#", &id, &k, &text, &len) ||
            id < 0 || (size_t)id >= nn0 || k < 1 || k > 250) {
            if (!PyErr_Occurred()) PyErr_SetString(PyExc_ValueError, "bad flagged entry");
            Py_DECREF(seq); free(group_of); free(kind);
            return NULL;
        }
        uint32_t g = norm_get(sc, (const uint8_t *)text, (size_t)len);
        if (g == NONE) { Py_DECREF(seq); free(group_of); free(kind); return out_of_memory(sc, -1); }
        group_of[id] = g;
        kind[id] = (uint8_t)k;
    }
    Py_DECREF(seq);
    size_t nn = sc->norms.count;  /* masked texts may have added entries */
    uint32_t *qid = malloc((nn + 1) * sizeof(uint32_t));       /* entry -> query id */
    SortKey *keys = malloc((nn + 1) * sizeof(SortKey));
    uint8_t *target = calloc(nn + 1, 1);
    int ok = qid && keys && target;
    size_t nq = 0;
    uint64_t blank = sc->null_queries;
    if (ok) {
        Py_BEGIN_ALLOW_THREADS
        for (size_t i = 0; i < nn0; i++) {
            if (sc->norms.e[i].len == 0) { blank += sc->norms.e[i].n; continue; }
            target[group_of[i]] = 1;
        }
        for (size_t i = 0; i < nn; i++) {
            if (!target[i]) continue;
            Entry *e = &sc->norms.e[i];
            keys[nq].key = prefix_key(sc->norms.arena + e->off, e->len);
            keys[nq].key2 = e->len > 8 ? prefix_key(sc->norms.arena + e->off + 8, e->len - 8) : 0;
            keys[nq].ent = (uint32_t)i;
            nq++;
        }
        /* below 2^31: follow() keeps a click in an event's top bit (tables of so many
         * queries would pass any memory limit long before) */
        ok = nq < 0x80000000u && sort_texts_two(keys, nq, &sc->norms, sc->nthreads);
        for (size_t i = 0; i < nn; i++) qid[i] = NONE;
        for (size_t q = 0; ok && q < nq; q++) qid[keys[q].ent] = (uint32_t)q;
        Py_END_ALLOW_THREADS
    }
    if (!ok) { free(group_of); free(kind); free(qid); free(keys); free(target); return out_of_memory(sc, -1); }
    sc->nq = nq;
    uint64_t *freq = calloc(nq + 1, 8), *rc_n = calloc(nq + 1, 8), *zero_n = calloc(nq + 1, 8), *bad = calloc(nq + 1, 8);
    double *max_ts = malloc((nq + 1) * sizeof(double));
    uint8_t *pii = calloc(nq + 1, 1), *excl = calloc(nq + 1, 1);
    sc->q_text = bmalloc(sh, (nq + 1) * sizeof(QText));
    sc->q_chars = bmalloc(sh, (nq + 1) * sizeof(uint32_t));
    sc->t_start = bmalloc(sh, (nq + 2) * sizeof(uint32_t));
    ok = freq && rc_n && zero_n && bad && max_ts && pii && excl && sc->q_text && sc->q_chars && sc->t_start;
    if (ok) {
        Py_BEGIN_ALLOW_THREADS
        for (size_t q = 0; q < nq; q++) max_ts[q] = NAN;
        for (size_t i = 0; i < nn0; i++) {
            Entry *e = &sc->norms.e[i];
            if (e->len == 0) continue;
            uint32_t q = qid[group_of[i]];
            freq[q] += e->n;
            rc_n[q] += e->rc_n;
            zero_n[q] += e->zero_n;
            bad[q] += e->bad_ts;
            if (!isnan(e->max_ts) && (isnan(max_ts[q]) || e->max_ts > max_ts[q])) max_ts[q] = e->max_ts;
            if (kind[i] && (!pii[q] || kind[i] < pii[q])) pii[q] = kind[i];
            if (kind[i] && exclude) excl[q] = 1;
        }
        /* the lines: raw id -> query id, through a compact norm -> query table (reading
         * the 48-byte entries at random would cost a cache miss per raw string) */
        uint32_t *norm_q = malloc((nn0 + 1) * sizeof(uint32_t));
        uint32_t *raw_q = malloc((sc->raws.count + 1) * sizeof(uint32_t));
        ok = raw_q && norm_q;
        for (size_t i = 0; ok && i < nn0; i++)
            norm_q[i] = sc->norms.e[i].len == 0 ? NONE : qid[group_of[i]];
        for (size_t r = 0; ok && r < sc->raws.count; r++) raw_q[r] = norm_q[sc->raw_norm[r]];
        for (size_t b = 0; ok && b < sc->nblk; b++) {
            uint32_t *raw = sc->blk[b].raw;
            for (uint32_t i = 0; i < BLOCK_LINES; i++)
                if (raw[i] != NONE) raw[i] = raw_q[raw[i]];
        }
        free(raw_q);
        free(norm_q);
        /* per query: its text, its length in characters and the hashes of its terms,
         * worked out in entry order, the order of the texts in the arena, each half of
         * the entries on its own thread */
        TermJob halves[2] = {{sc, qid, 0, nn / 2, NULL}, {sc, qid, nn / 2, nn, NULL}};
        run_two(sc->nthreads, count_terms, &halves[0], count_terms, &halves[1]);
        sc->t_start[0] = 0;
        for (size_t q = 0; q < nq; q++) sc->t_start[q + 1] += sc->t_start[q];
        size_t nt = sc->t_start[nq];
        uint64_t *th = ok ? bmalloc(sh, (nt + 1) * sizeof(uint64_t)) : NULL;
        ok = ok && th;
        halves[0].th = halves[1].th = th;
        if (ok) run_two(sc->nthreads, hash_terms, &halves[0], hash_terms, &halves[1]);
        sc->t_hash = th;
        sc->nterms = nt + 1;
        Py_END_ALLOW_THREADS
    }
    /* from here on texts are read through q_text alone: the table, the entries and the
     * raw strings' links go, before the strings are made and follow() needs memory */
    free(group_of); free(kind); free(qid); free(keys); free(target);
    bfree(sh, sc->norms.slots, ((size_t)1 << sc->norms.bits) * sizeof(uint64_t));
    bfree(sh, sc->norms.e, sc->norms.cap * sizeof(Entry));
    bfree(sh, sc->raw_norm, (sc->raws.count + 1) * sizeof(uint32_t));
    sc->norms.slots = NULL;
    sc->norms.e = NULL;
    sc->raw_norm = NULL;
    PyObject *result = NULL;
    if (ok) {
        /* in query order, so that the string objects lie in memory in the order every later
         * pass over them (NumPy's, the strata's) walks them */
        PyObject *texts = PyList_New((Py_ssize_t)nq);
        for (size_t q = 0; texts && q < nq; q++) {
            if (q + 8 < nq) __builtin_prefetch(sc->norms.arena + sc->q_text[q + 8].off);
            const QText *e = &sc->q_text[q];
            const char *text = (const char *)sc->norms.arena + e->off;
            PyObject *s;
            if (sc->q_chars[q] == e->len) {  /* ASCII: copied, no decoding */
                s = PyUnicode_New(e->len, 127);
                if (s) memcpy(PyUnicode_DATA(s), text, e->len);
            } else {
                s = PyUnicode_DecodeUTF8(text, e->len, "strict");
            }
            if (!s) { Py_CLEAR(texts); break; }
            PyList_SET_ITEM(texts, (Py_ssize_t)q, s);
        }
        result = texts ? Py_BuildValue("{s:N,s:K,s:n,s:K}", "query", texts,
                                       "blank", (unsigned long long)blank,
                                       "distinct_raw", (Py_ssize_t)sc->raws.count,
                                       "rows", (unsigned long long)sc->lines)
                       : NULL;
        /* each array goes as soon as its copy is made */
        struct { const char *name; void *p; size_t size; } arrays[] = {
            {"frequency", freq, 8}, {"rc_n", rc_n, 8}, {"zero_n", zero_n, 8}, {"bad_ts", bad, 8},
            {"max_ts", max_ts, 8}, {"pii", pii, 1}, {"excluded", excl, 1}};
        for (int k = 0; k < 7; k++) {
            PyObject *copy = result ? bytes_of(arrays[k].p, nq * arrays[k].size) : NULL;
            free(arrays[k].p);
            if (result && (!copy || PyDict_SetItemString(result, arrays[k].name, copy) < 0)) Py_CLEAR(result);
            Py_XDECREF(copy);
        }
        return result;
    }
    free(freq); free(rc_n); free(zero_n); free(bad); free(max_ts); free(pii); free(excl);
    return out_of_memory(sc, -1);
}

/* ------------------------------------------------------------------ follow() */

/* Whether the Levenshtein distance of code points a[0:la] and b[0:lb] is at most bound
 * (0 to 2). A common prefix and suffix change no distance and go first; then only the
 * cells within bound of the diagonal are computed (any other is further than bound). */
static int lev_within(const uint32_t *a, size_t la, const uint32_t *b, size_t lb, int bound) {
    while (la && lb && a[0] == b[0]) { a++; b++; la--; lb--; }
    while (la && lb && a[la - 1] == b[lb - 1]) { la--; lb--; }
    if (la == 0 || lb == 0) return (la > lb ? la : lb) <= (size_t)bound;
    if ((la > lb ? la - lb : lb - la) > (size_t)bound) return 0;
    const int far = bound + 1;  /* any distance past the bound */
    int stack_prev[130], stack_cur[130];
    int *prev = lb < 129 ? stack_prev : malloc((lb + 2) * sizeof(int));
    int *cur = lb < 129 ? stack_cur : malloc((lb + 2) * sizeof(int));
    int result = 0;
    if (!prev || !cur) goto done;
    for (size_t j = 0; j <= lb; j++) prev[j] = j <= (size_t)bound ? (int)j : far;
    for (size_t i = 1; i <= la; i++) {
        size_t lo = i > (size_t)bound ? i - bound : 1;
        size_t hi = i + bound < lb ? i + bound : lb;
        cur[lo - 1] = lo == 1 && i <= (size_t)bound ? (int)i : far;
        int best = far;
        for (size_t j = lo; j <= hi; j++) {
            int v = prev[j - 1] + (a[i - 1] != b[j - 1]);
            if (prev[j] + 1 < v) v = prev[j] + 1;
            if (cur[j - 1] + 1 < v) v = cur[j - 1] + 1;
            if (v > far) v = far;
            cur[j] = v;
            if (v < best) best = v;
        }
        if (hi < lb) cur[hi + 1] = far;  /* the next row's right edge reads it */
        if (best > bound) goto done;
        int *t = prev; prev = cur; cur = t;
    }
    result = prev[lb] <= bound;
done:
    if (lb >= 129) { free(prev == stack_prev ? NULL : prev); free(cur == stack_cur ? NULL : cur); }
    return result;
}

/* The similarity of annotation/sampling_sql.py's reform_sql: a shared term, or an edit
 * distance of at most min(2, ceil(0.3 * the longer length in characters)). */
static int similar(const Scanner *sc, uint32_t a, uint32_t b) {
    uint32_t i = sc->t_start[a], ie = sc->t_start[a + 1];
    uint32_t j = sc->t_start[b], je = sc->t_start[b + 1];
    const uint64_t *th = sc->t_hash;
    while (i < ie && j < je) {
        if (th[i] == th[j]) return 1;
        if (th[i] < th[j]) i++; else j++;
    }
    uint32_t la = sc->q_chars[a], lb = sc->q_chars[b];
    uint32_t longer = la > lb ? la : lb;
    int bound = (int)((3 * (uint64_t)longer + 9) / 10);
    if (bound > 2) bound = 2;
    uint32_t diff = la > lb ? la - lb : lb - la;
    if (diff > (uint32_t)bound) return 0;
    const QText *ea = &sc->q_text[a], *eb = &sc->q_text[b];
    const uint8_t *pa = sc->norms.arena + ea->off, *pb = sc->norms.arena + eb->off;
    uint32_t sa[130], sb[130];
    uint32_t *ca = la < 129 ? sa : malloc((la + 1) * sizeof(uint32_t));
    uint32_t *cb = lb < 129 ? sb : malloc((lb + 1) * sizeof(uint32_t));
    int r = 0;
    if (ca && cb) {
        decode(pa, ea->len, ca);
        decode(pb, eb->len, cb);
        r = lev_within(ca, la, cb, lb, bound);
    }
    if (ca != sa) free(ca);
    if (cb != sb) free(cb);
    return r;
}

/* A line of a session, as the walk reads it: 12 bytes, the click in the top bit of the
 * query id (number() keeps query ids below 2^31). */
typedef struct __attribute__((packed, aligned(4))) {
    double ts;
    uint32_t qc;
} Event;

#define CLICK_BIT 0x80000000u
#define EV_Q(e) ((e).qc & ~CLICK_BIT)

static inline int event_before(const Event *x, const Event *y) {
    return x->ts < y->ts || (x->ts == y->ts && EV_Q(*x) < EV_Q(*y));
}

static int cmp_event(const void *a, const void *b) {
    const Event *x = a, *y = b;
    return event_before(x, y) ? -1 : event_before(y, x) ? 1 : 0;
}

/* A line in the partition: its session (or user) hash and its event (a user's line uses
 * only the query). */
typedef struct __attribute__((packed, aligned(4))) {
    uint64_t key;
    Event ev;
} Rec;

/* A query's counts in one half of the session walk, side by side: one cache miss per
 * event, not five. */
typedef struct {
    uint32_t last, distinct, seq, aband, reform;
} Tally;

/* A slot of the table that groups one bucket's lines: the key, and the group's number
 * (sessions) or the query (users); in use when its mark is the bucket's (so the table is
 * never cleared: each bucket has its own mark). */
typedef struct {
    uint64_t key;
    uint32_t val, mark;
} Slot;

/* Lines are grouped by session (or user) in rounds of at most this many, each round a
 * range of buckets: the partition's memory stays bounded whatever the log's size. */
#define ROUND_LINES ((size_t)1 << 22)

/* One of the two halves of follow()'s work on one key (sessions or users): it reads half
 * of the blocks when partitioning, and walks half of each round's buckets. */
typedef struct {
    Scanner *sc;
    int by_user;
    unsigned bits;              /* buckets: the top bits of the key */
    size_t blk_from, blk_to;    /* the blocks this half partitions */
    uint32_t *hist;             /* per bucket: this half's lines */
    uint32_t *pos;              /* per bucket: where this half writes next in the round */
    size_t lo, hi;              /* the round's buckets */
    Rec *recs;                  /* the round's lines, bucket by bucket */
    const uint32_t *bstart;     /* bucket b's lines are recs[bstart[b - lo] ...] */
    size_t walk_lo, walk_hi;    /* the buckets this half walks */
    /* grouping scratch, sized for the largest bucket */
    Slot *table;
    size_t tsize;
    uint32_t mark;
    uint32_t *gid, *gstart;
    Event *grouped;
    /* results */
    Tally *tally;               /* sessions */
    uint32_t *distinct;         /* users: distinct users per query */
    uint32_t token;             /* sessions: a number per session walked */
    double window;
} Half;

static inline size_t bucket_of(uint64_t key, unsigned bits) { return (size_t)(key >> (64 - bits)); }

static inline const uint64_t *keys_of(const Block *B, int by_user) { return by_user ? B->uh : B->sh; }

/* This half's lines per bucket. */
static void *part_count(void *arg) {
    Half *h = arg;
    for (size_t b = h->blk_from; b < h->blk_to; b++) {
        const Block *B = &h->sc->blk[b];
        const uint64_t *key = keys_of(B, h->by_user);
        for (uint32_t i = 0; i < BLOCK_LINES; i++)
            if (key[i] && B->raw[i] != NONE) h->hist[bucket_of(key[i], h->bits)]++;
    }
    return NULL;
}

/* This half's lines of the round's buckets into their places. */
static void *part_scatter(void *arg) {
    Half *h = arg;
    for (size_t b = h->blk_from; b < h->blk_to; b++) {
        const Block *B = &h->sc->blk[b];
        const uint64_t *key = keys_of(B, h->by_user);
        for (uint32_t i = 0; i < BLOCK_LINES; i++) {
            if (!key[i] || B->raw[i] == NONE) continue;
            size_t k = bucket_of(key[i], h->bits);
            if (k < h->lo || k >= h->hi) continue;
            Rec *r = &h->recs[h->pos[k - h->lo]++];
            r->key = key[i];
            r->ev.qc = B->raw[i];
            if (!h->by_user) {
                r->ev.ts = B->ts[i];
                if (B->clk[i]) r->ev.qc |= CLICK_BIT;
            }
        }
    }
    return NULL;
}

/* The mask of a table of at least twice n slots for the next bucket (its mark new). */
static size_t table_for(Half *h, size_t n) {
    size_t size = 16;
    while (size < 2 * n) size <<= 1;
    if (++h->mark == 0) {  /* marks wrapped around: clear once */
        memset(h->table, 0, h->tsize * sizeof(Slot));
        h->mark = 1;
    }
    return size - 1;
}

/* Distinct users per query in one bucket: each new (user, query) pair counts once. */
static void users_bucket(Half *h, const Rec *r, size_t n) {
    size_t mask = table_for(h, n);
    for (size_t i = 0; i < n; i++) {
        uint32_t q = r[i].ev.qc;
        size_t s = mix(r[i].key ^ q, 0x9E3779B97F4A7C15ull) & mask;
        for (;; s = (s + 1) & mask) {
            Slot *x = &h->table[s];
            if (x->mark != h->mark) { *x = (Slot){r[i].key, q, h->mark}; h->distinct[q]++; break; }
            if (x->key == r[i].key && x->val == q) break;
        }
    }
}

/* A query and the next one in its session, within the window: a reformulation when they
 * are similar. */
typedef struct {
    uint32_t a, b;
} Pair;

#define PAIRS 32

/* The similarity test on a batch of pairs, their data fetched level by level for all of
 * them before any is tested: each test reads five arrays at random, and a miss at a time
 * would leave the memory idle. Returns 0, the batch's new size. */
static int flush_pairs(const Scanner *sc, Tally *t, const Pair *p, int n) {
    const uint32_t *ts = sc->t_start, *chars = sc->q_chars;
    const QText *text = sc->q_text;
    for (int i = 0; i < n; i++) {
        __builtin_prefetch(&ts[p[i].a]);
        __builtin_prefetch(&ts[p[i].b]);
        __builtin_prefetch(&chars[p[i].a]);
        __builtin_prefetch(&chars[p[i].b]);
        __builtin_prefetch(&text[p[i].a]);
        __builtin_prefetch(&text[p[i].b]);
    }
    for (int i = 0; i < n; i++) {
        __builtin_prefetch(&sc->t_hash[ts[p[i].a]]);
        __builtin_prefetch(&sc->t_hash[ts[p[i].b]]);
        uint32_t la = chars[p[i].a], lb = chars[p[i].b];
        if ((la > lb ? la - lb : lb - la) <= 2) {  /* the edit distance may be asked */
            __builtin_prefetch(sc->norms.arena + text[p[i].a].off);
            __builtin_prefetch(sc->norms.arena + text[p[i].b].off);
        }
    }
    for (int i = 0; i < n; i++)
        if (similar(sc, p[i].a, p[i].b)) t[p[i].a].reform++;
    return 0;
}

/* One session's lines: distinct sessions per query, then its events in time order
 * (successors, abandonment, and the pairs to test for reformulation). */
static void walk_session(Half *h, Event *ev, size_t m0, const Event *end, Pair *pairs, int *npairs) {
    Tally *t = h->tally;
    uint32_t token = h->token++;
    size_t m = 0;
    for (size_t k = 0; k < m0; k++) {
        /* the counts of the lines ahead in the bucket, sessions are short */
        if (ev + k + 16 < end) __builtin_prefetch(&t[EV_Q(ev[k + 16])], 1);
        Event e = ev[k];
        uint32_t q = EV_Q(e);
        if (t[q].last != token) { t[q].last = token; t[q].distinct++; }
        if (!isnan(e.ts)) ev[m++] = e;  /* the events with a time, in place */
    }
    if (m == 0) return;
    if (m <= 24) {
        for (size_t i = 1; i < m; i++) {
            Event x = ev[i];
            size_t j = i;
            while (j > 0 && event_before(&x, &ev[j - 1])) { ev[j] = ev[j - 1]; j--; }
            ev[j] = x;
        }
    } else {
        qsort(ev, m, sizeof(Event), cmp_event);
    }
    double last_click = NAN;
    for (size_t i = 0; i < m; i++)
        if ((ev[i].qc & CLICK_BIT) && (isnan(last_click) || ev[i].ts > last_click))
            last_click = ev[i].ts;
    for (size_t i = 0; i < m; i++) {
        uint32_t q = EV_Q(ev[i]);
        t[q].seq++;
        if (isnan(last_click) || last_click < ev[i].ts) t[q].aband++;
        if (i + 1 < m) {
            double dt = ev[i + 1].ts - ev[i].ts;
            uint32_t next = EV_Q(ev[i + 1]);
            if (dt > 0 && dt <= h->window && next != q) {
                pairs[(*npairs)++] = (Pair){q, next};
                if (*npairs == PAIRS) *npairs = flush_pairs(h->sc, t, pairs, *npairs);
            }
        }
    }
}

/* The sessions of one bucket: its lines grouped by session (a table of the bucket's keys,
 * then a counting sort), each session walked. */
static void sessions_bucket(Half *h, const Rec *r, size_t n, Pair *pairs, int *npairs) {
    size_t mask = table_for(h, n);
    uint32_t groups = 0;
    for (size_t i = 0; i < n; i++) {
        size_t s = mix(r[i].key, 0x9E3779B97F4A7C15ull) & mask;
        for (;; s = (s + 1) & mask) {
            Slot *x = &h->table[s];
            if (x->mark != h->mark) {
                *x = (Slot){r[i].key, groups, h->mark};
                h->gstart[++groups] = 0;
                break;
            }
            if (x->key == r[i].key) break;
        }
        h->gid[i] = h->table[s].val;
        h->gstart[h->gid[i] + 1]++;
    }
    h->gstart[0] = 0;
    for (uint32_t g = 0; g < groups; g++) h->gstart[g + 1] += h->gstart[g];
    for (size_t i = 0; i < n; i++) h->grouped[h->gstart[h->gid[i]]++] = r[i].ev;
    /* gstart[g] is now where group g ends, its start where g - 1 ends */
    for (uint32_t g = 0, from = 0; g < groups; g++) {
        walk_session(h, h->grouped + from, h->gstart[g] - from, h->grouped + n, pairs, npairs);
        from = h->gstart[g];
    }
}

/* This half's buckets of the round. */
static void *part_walk(void *arg) {
    Half *h = arg;
    Pair pairs[PAIRS];
    int npairs = 0;
    for (size_t k = h->walk_lo; k < h->walk_hi; k++) {
        const Rec *r = h->recs + h->bstart[k - h->lo];
        size_t n = h->bstart[k - h->lo + 1] - h->bstart[k - h->lo];
        if (!n) continue;
        if (h->by_user) users_bucket(h, r, n);
        else sessions_bucket(h, r, n, pairs, &npairs);
    }
    flush_pairs(h->sc, h->tally, pairs, npairs);
    return NULL;
}

/* Once grouped, the lines' keys (and, for sessions, times and clicks) go. */
static void drop_keys(Scanner *sc, int by_user) {
    for (size_t b = 0; b < sc->nblk; b++) {
        Block *B = &sc->blk[b];
        if (by_user) {
            bfree(&sc->sh, B->uh, BLOCK_LINES * sizeof(uint64_t));
            B->uh = NULL;
            continue;
        }
        bfree(&sc->sh, B->sh, BLOCK_LINES * sizeof(uint64_t));
        bfree(&sc->sh, B->ts, BLOCK_LINES * sizeof(double));
        bfree(&sc->sh, B->clk, BLOCK_LINES);
        B->sh = NULL;
        B->ts = NULL;
        B->clk = NULL;
    }
}

/* Partition the lines with a query and a key by the key's top bits (both halves count,
 * then each round scatters its buckets and the halves walk half of them each); 0 when
 * memory ran out. */
static int group_by(Scanner *sc, int by_user, Half halves[2]) {
    size_t nblk = sc->nblk, lines = sc->nblk * (size_t)BLOCK_LINES;
    unsigned bits = 1;
    while (bits < 16 && (lines >> bits) > 2048) bits++;
    size_t nb = (size_t)1 << bits;
    int ok = 1;
    for (int k = 0; k < 2; k++) {
        Half *h = &halves[k];
        h->sc = sc;
        h->by_user = by_user;
        h->bits = bits;
        h->blk_from = k ? nblk / 2 : 0;
        h->blk_to = k ? nblk : nblk / 2;
        h->hist = calloc(nb, sizeof(uint32_t));
        h->pos = malloc((nb + 1) * sizeof(uint32_t));
        ok &= h->hist && h->pos;
    }
    uint32_t *bstart = malloc((nb + 1) * sizeof(uint32_t));
    if (!ok || !bstart) goto done;
    run_two(sc->nthreads, part_count, &halves[0], part_count, &halves[1]);
    size_t largest = 0, total = 0;
    for (size_t k = 0; k < nb; k++) {
        size_t n = (size_t)halves[0].hist[k] + halves[1].hist[k];
        if (n > largest) largest = n;
        total += n;
    }
    if (total >= UINT32_MAX - 1) { ok = 0; goto done; }
    size_t round_cap = largest > sc->round_lines ? largest : sc->round_lines;
    if (round_cap > total) round_cap = total;
    Rec *recs = halloc((round_cap + 1) * sizeof(Rec));
    size_t tsize = 16;
    while (tsize < 2 * largest) tsize <<= 1;
    for (int k = 0; k < 2 && recs; k++) {
        Half *h = &halves[k];
        h->recs = recs;
        h->bstart = bstart;
        h->table = halloc(tsize * sizeof(Slot));
        h->tsize = tsize;
        h->mark = 0;
        if (h->table) memset(h->table, 0, tsize * sizeof(Slot));
        h->gid = malloc((largest + 1) * sizeof(uint32_t));
        h->gstart = malloc((largest + 2) * sizeof(uint32_t));
        h->grouped = malloc((largest + 1) * sizeof(Event));
        ok &= h->table && h->gid && h->gstart && h->grouped;
    }
    ok &= recs != NULL;
    for (size_t lo = 0; ok && lo < nb;) {
        /* the round: buckets [lo, hi) with at most round_cap lines */
        size_t hi = lo, n = 0;
        while (hi < nb && n + halves[0].hist[hi] + halves[1].hist[hi] <= round_cap) {
            bstart[hi - lo] = (uint32_t)n;
            halves[0].pos[hi - lo] = (uint32_t)n;
            halves[1].pos[hi - lo] = (uint32_t)(n + halves[0].hist[hi]);
            n += (size_t)halves[0].hist[hi] + halves[1].hist[hi];
            hi++;
        }
        bstart[hi - lo] = (uint32_t)n;
        size_t mid = lo;
        while (mid < hi && bstart[mid - lo] < n / 2) mid++;
        for (int k = 0; k < 2; k++) {
            halves[k].lo = lo;
            halves[k].hi = hi;
        }
        halves[0].walk_lo = lo;
        halves[0].walk_hi = halves[1].walk_lo = mid;
        halves[1].walk_hi = hi;
        run_two(sc->nthreads, part_scatter, &halves[0], part_scatter, &halves[1]);
        run_two(sc->nthreads, part_walk, &halves[0], part_walk, &halves[1]);
        lo = hi;
    }
    for (int k = 0; k < 2; k++) {
        Half *h = &halves[k];
        hfree(h->table, tsize * sizeof(Slot));
        free(h->gid);
        free(h->gstart);
        free(h->grouped);
    }
    hfree(recs, (round_cap + 1) * sizeof(Rec));
done:
    for (int k = 0; k < 2; k++) {
        free(halves[k].hist);
        free(halves[k].pos);
        halves[k].hist = halves[k].pos = NULL;
    }
    free(bstart);
    if (ok) drop_keys(sc, by_user);
    return ok;
}

/* follow(window): per query, distinct sessions and users, sequenced events, abandoned
 * ones and reformulated ones (those whose next query in the session is similar). */
static PyObject *Scanner_follow(Scanner *sc, PyObject *args) {
    double window;
    if (!PyArg_ParseTuple(args, "d", &window)) return NULL;
    if (sc->stage != 4) return PyErr_Format(PyExc_RuntimeError, "follow() runs after number()");
    sc->stage = 5;
    size_t nq = sc->nq;
    /* the heap's free pages (the earlier phases' small tables) back to the system before
     * the grouping needs its own: they would otherwise count in the process's peak */
    malloc_trim(0);
    /* each half its own counts, added up at the end */
    Tally *tallies[2] = {halloc((nq + 1) * sizeof(Tally)), halloc((nq + 1) * sizeof(Tally))};
    uint32_t *distinct[2] = {calloc(nq + 1, sizeof(uint32_t)), calloc(nq + 1, sizeof(uint32_t))};
    int ok = tallies[0] && tallies[1] && distinct[0] && distinct[1];
    for (size_t q = 0; ok && q < nq; q++) tallies[0][q] = tallies[1][q] = (Tally){NONE, 0, 0, 0, 0};
    if (ok) {
        Py_BEGIN_ALLOW_THREADS
        /* users first: their keys go before the sessions' round needs memory */
        Half users[2] = {{.distinct = distinct[0]}, {.distinct = distinct[1]}};
        Half sessions[2] = {{.tally = tallies[0], .window = window},
                            {.tally = tallies[1], .window = window}};
        ok = group_by(sc, 1, users) && group_by(sc, 0, sessions);
        Py_END_ALLOW_THREADS
    }
    PyObject *result = NULL;
    uint32_t *out[5];
    for (int k = 0; k < 5; k++) ok &= (out[k] = ok ? malloc((nq + 1) * sizeof(uint32_t)) : NULL) != NULL;
    if (ok) {
        for (size_t q = 0; q < nq; q++) {
            const Tally *x = &tallies[0][q], *y = &tallies[1][q];
            out[0][q] = x->distinct + y->distinct;  /* a session is in one half only */
            out[1][q] = distinct[0][q] + distinct[1][q];
            out[2][q] = x->seq + y->seq;
            out[3][q] = x->aband + y->aband;
            out[4][q] = x->reform + y->reform;
        }
        result = Py_BuildValue("{s:N,s:N,s:N,s:N,s:N}",
                               "sessions", bytes_of(out[0], nq * 4),
                               "users", bytes_of(out[1], nq * 4),
                               "seq_n", bytes_of(out[2], nq * 4),
                               "abandoned_n", bytes_of(out[3], nq * 4),
                               "reformulated", bytes_of(out[4], nq * 4));
    } else {
        out_of_memory(sc, -1);
    }
    for (int k = 0; k < 5; k++) free(out[k]);
    for (int k = 0; k < 2; k++) {
        hfree(tallies[k], (nq + 1) * sizeof(Tally));
        free(distinct[k]);
    }
    return result;
}

/* ------------------------------------------------------------------ the type */

static void scanner_release(Scanner *sc) {
    Shared *sh = &sc->sh;
    for (int t = 0; t < MAX_THREADS; t++) {
        Worker *w = &sc->workers[t];
        if (!w->sc) continue;
        dict_free(sh, &w->raws);
        for (size_t b = 0; b < w->nblocks; b++) free_block(sh, &w->blocks[b]);
        free(w->blocks);
        w->blocks = NULL;
        w->nblocks = 0;
    }
    for (size_t b = 0; b < sc->nblk; b++) free_block(sh, &sc->blk[b]);
    free(sc->blk);
    sc->blk = NULL;
    sc->nblk = 0;
    size_t nr = sc->raws.count;
    dict_free(sh, &sc->raws);
    dict_free(sh, &sc->norms);
    bfree(sh, sc->raw_norm, (nr + 1) * sizeof(uint32_t));
    bfree(sh, sc->foreign, nr + 1);
    bfree(sh, sc->q_text, (sc->nq + 1) * sizeof(QText));
    bfree(sh, sc->q_chars, (sc->nq + 1) * sizeof(uint32_t));
    bfree(sh, sc->t_start, (sc->nq + 2) * sizeof(uint32_t));
    bfree(sh, sc->t_hash, sc->nterms * sizeof(uint64_t));
    sc->raw_norm = NULL;
    sc->foreign = NULL;
    sc->q_chars = sc->t_start = NULL;
    sc->q_text = NULL;
    sc->t_hash = NULL;
}

static void Scanner_dealloc(Scanner *sc) {
    scanner_release(sc);
    PyMem_Free(sc->path);
    Py_TYPE(sc)->tp_free((PyObject *)sc);
}

static int Scanner_init(Scanner *sc, PyObject *args, PyObject *kw) {
    static char *names[] = {"path", "offset", "delimiter", "quoted", "ncols", "columns",
                            "ts_mode", "click_mode", "threads", "budget", "round_lines", NULL};
    PyObject *path_obj;
    long long offset, budget, round_lines = (long long)ROUND_LINES;
    int delimiter, quoted, ncols, ts_mode, click_mode, threads;
    PyObject *columns;
    if (!PyArg_ParseTupleAndKeywords(args, kw, "O&LCpiOiiiL|L", names, PyUnicode_FSConverter, &path_obj,
                                     &offset, &delimiter, &quoted, &ncols, &columns, &ts_mode,
                                     &click_mode, &threads, &budget, &round_lines))
        return -1;
    const char *path = PyBytes_AS_STRING(path_obj);
    sc->path = PyMem_Malloc(strlen(path) + 1);
    if (!sc->path) { Py_DECREF(path_obj); PyErr_NoMemory(); return -1; }
    strcpy(sc->path, path);
    Py_DECREF(path_obj);
    if (delimiter > 127 || ncols < 1 || ncols > MAX_COLUMNS || threads < 1 || round_lines < 1) {
        PyErr_SetString(PyExc_ValueError, "bad dialect, column count, thread count or round size");
        return -1;
    }
    sc->delimiter = (uint8_t)delimiter;
    sc->quoted = quoted;
    sc->ncols = ncols;
    sc->offset = offset;
    sc->ts_mode = ts_mode;
    sc->click_mode = click_mode;
    sc->nthreads = threads > MAX_THREADS ? MAX_THREADS : threads;
    sc->sh.budget = (size_t)budget;
    sc->round_lines = (size_t)round_lines;
    if (!PyArg_ParseTuple(columns, "iiiiii", &sc->col[F_QUERY], &sc->col[F_TS], &sc->col[F_SESSION],
                          &sc->col[F_USER], &sc->col[F_RC], &sc->col[F_CLICK]))
        return -1;
    for (int f = 0; f < F_COUNT; f++) {
        if (sc->col[f] >= ncols || (f == F_QUERY && sc->col[f] < 0)) {
            PyErr_SetString(PyExc_ValueError, "a column index out of range");
            return -1;
        }
    }
    struct stat st;
    if (stat(sc->path, &st) != 0) { PyErr_SetFromErrnoWithFilename(PyExc_OSError, sc->path); return -1; }
    sc->size = (int64_t)st.st_size;
    return 0;
}

static PyObject *Scanner_progress(Scanner *sc, void *closure) {
    long long done = 0;
    for (int t = 0; t < MAX_THREADS; t++) done += atomic_load(&sc->workers[t].done);
    int64_t span = sc->size - sc->offset;
    return PyFloat_FromDouble(span > 0 ? (double)done / (double)span : 1.0);
}

/* close(): give back every table now, not when the object is collected. */
static PyObject *Scanner_close(Scanner *sc, PyObject *unused) {
    Py_BEGIN_ALLOW_THREADS
    scanner_release(sc);
    Py_END_ALLOW_THREADS
    sc->stage = 6;
    Py_RETURN_NONE;
}

static PyObject *Scanner_cancel(Scanner *sc, PyObject *unused) {
    atomic_store(&sc->sh.stop, 1);
    Py_RETURN_NONE;
}

static PyObject *Scanner_get_memory(Scanner *sc, void *closure) {
    return PyLong_FromSize_t(atomic_load(&sc->sh.used));
}

static PyObject *Scanner_get_peak(Scanner *sc, void *closure) {
    return PyLong_FromSize_t(atomic_load(&sc->sh.peak));
}

static PyMethodDef Scanner_methods[] = {
    {"read", (PyCFunction)Scanner_read, METH_NOARGS, "Parse the file (releases the GIL)."},
    {"foreign", (PyCFunction)Scanner_foreign, METH_VARARGS, "The raw strings past ASCII."},
    {"ascii", (PyCFunction)Scanner_ascii, METH_NOARGS, "Normalise the ASCII raw strings."},
    {"set_norms", (PyCFunction)Scanner_set_norms, METH_O, "Normalised texts of foreign strings."},
    {"screen", (PyCFunction)Scanner_screen, METH_NOARGS, "Texts the privacy screen must see."},
    {"number", (PyCFunction)Scanner_number, METH_VARARGS, "Queries in text order, with sums."},
    {"follow", (PyCFunction)Scanner_follow, METH_VARARGS, "Sessions, users and sequences."},
    {"cancel", (PyCFunction)Scanner_cancel, METH_NOARGS, "Stop read() at the next line."},
    {"close", (PyCFunction)Scanner_close, METH_NOARGS, "Free every table now."},
    {NULL}};

static PyGetSetDef Scanner_getset[] = {
    {"progress", (getter)Scanner_progress, NULL, "share of the file parsed", NULL},
    {"memory", (getter)Scanner_get_memory, NULL, "bytes held", NULL},
    {"peak_memory", (getter)Scanner_get_peak, NULL, "the most bytes held at once", NULL},
    {NULL}};

static PyTypeObject ScannerType = {
    PyVarObject_HEAD_INIT(NULL, 0)
    .tp_name = "annotation._logscan.Scanner",
    .tp_basicsize = sizeof(Scanner),
    .tp_flags = Py_TPFLAGS_DEFAULT,
    .tp_doc = "One regular CSV or TSV log, read into per-query statistics.",
    .tp_new = PyType_GenericNew,
    .tp_init = (initproc)Scanner_init,
    .tp_dealloc = (destructor)Scanner_dealloc,
    .tp_methods = Scanner_methods,
    .tp_getset = Scanner_getset,
};

static struct PyModuleDef module = {PyModuleDef_HEAD_INIT, "_logscan",
                                    "The compiled reader of regular CSV and TSV search logs.", -1, NULL};

PyMODINIT_FUNC PyInit__logscan(void) {
    c_locale = newlocale(LC_ALL_MASK, "C", (locale_t)0);
    if (!c_locale) return PyErr_NoMemory();
    if (PyType_Ready(&ScannerType) < 0) return NULL;
    PyObject *m = PyModule_Create(&module);
    if (!m) return NULL;
    Unsupported = PyErr_NewException("annotation._logscan.Unsupported", PyExc_ValueError, NULL);
    Py_INCREF(&ScannerType);
    if (PyModule_AddObject(m, "Scanner", (PyObject *)&ScannerType) < 0 ||
        PyModule_AddObject(m, "Unsupported", Unsupported) < 0)
        return NULL;
    return m;
}
