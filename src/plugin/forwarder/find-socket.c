/*
 * Finds `ipam.socket` in a CNI network config: the forwarder's one piece of parsing.
 *
 * It answers what the TypeScript plugin's `socketOf(JSON.parse(text))` answers, so the forwarder
 * and the plugin ask the same agent: the value of the top-level key "ipam" when that is an object,
 * of its key "socket" when that is a string starting with "/", escapes decoded. As in JSON.parse,
 * the last of duplicate keys wins, keys match after their escapes are decoded ("ip\u0061m"), and
 * text that is not valid JSON (RFC 8259) names no socket: the caller then uses WARREN_SOCKET or
 * the default, and the agent or the TypeScript plugin reports the bad JSON with its own words.
 *
 * Guarantees:
 * - No allocation and no recursion: one pass over the text with a fixed-size stack of container
 *   kinds (WARREN_MAX_DEPTH bits, on the C stack); time linear in `len`.
 * - Reads only json[0..len): the text need not be NUL-terminated and may contain NUL.
 * - Writes only out[0..outlen); after FOUND, `out` is NUL-terminated, starts with '/', holds no
 *   NUL before its end, is valid UTF-8 and at most WARREN_SOCKET_PATH_MAX bytes. After any other
 *   answer out[0] is NUL (when outlen > 0).
 * - Nesting deeper than WARREN_MAX_DEPTH anywhere before the first malformation answers TOO_DEEP,
 *   which the TypeScript plugin's own limit refuses (it, not the forwarder, owns that answer).
 * - A socket value that starts with "/" but is no path the kernel and Node would both take as
 *   written (a NUL, a lone surrogate escape, bytes that are not UTF-8 and that Node would
 *   replace, longer than sun_path) answers UNUSABLE: the caller hands the call to the TypeScript
 *   plugin rather than guess.
 */
#include "find-socket.h"

#include <stdint.h>
#include <string.h>

/* Where the decoded bytes of one string go, and what decoding saw. */
struct sink {
  int decode;      /* 0: only check the syntax */
  char *buf;
  size_t cap;      /* bytes buf can take; what does not fit is counted, not stored */
  size_t len;      /* bytes decoded, counted past cap too */
  int first;       /* first decoded byte, -1 while none */
  int nul;         /* a decoded NUL (\u0000) */
  int bad_text;    /* a lone surrogate escape, or raw bytes that are not UTF-8 */
  int check_utf8;  /* validate raw bytes >= 0x80 (only where the decoded text is used) */
};

static void put(struct sink *s, unsigned char byte) {
  if (!s->decode) return;
  if (s->len < s->cap) s->buf[s->len] = (char)byte;
  if (s->len == 0) s->first = byte;
  if (byte == 0) s->nul = 1;
  s->len++;
}

static int hex4(const unsigned char *p, const unsigned char *end, unsigned *value) {
  if (end - p < 4) return 0;
  unsigned v = 0;
  for (int i = 0; i < 4; i++) {
    unsigned char c = p[i];
    unsigned d;
    if (c >= '0' && c <= '9') d = c - '0';
    else if (c >= 'a' && c <= 'f') d = c - 'a' + 10;
    else if (c >= 'A' && c <= 'F') d = c - 'A' + 10;
    else return 0;
    v = v * 16 + d;
  }
  *value = v;
  return 1;
}

static void put_code_point(struct sink *s, uint32_t cp) {
  if (cp < 0x80) {
    put(s, (unsigned char)cp);
  } else if (cp < 0x800) {
    put(s, (unsigned char)(0xC0 | (cp >> 6)));
    put(s, (unsigned char)(0x80 | (cp & 0x3F)));
  } else if (cp < 0x10000) {
    put(s, (unsigned char)(0xE0 | (cp >> 12)));
    put(s, (unsigned char)(0x80 | ((cp >> 6) & 0x3F)));
    put(s, (unsigned char)(0x80 | (cp & 0x3F)));
  } else {
    put(s, (unsigned char)(0xF0 | (cp >> 18)));
    put(s, (unsigned char)(0x80 | ((cp >> 12) & 0x3F)));
    put(s, (unsigned char)(0x80 | ((cp >> 6) & 0x3F)));
    put(s, (unsigned char)(0x80 | (cp & 0x3F)));
  }
}

/* Length of the well-formed UTF-8 sequence at p (Unicode table 3-7), or 0 if there is none. */
static size_t utf8_sequence(const unsigned char *p, const unsigned char *end) {
  unsigned char c = p[0];
  size_t n;
  unsigned char lo = 0x80, hi = 0xBF;
  if (c >= 0xC2 && c <= 0xDF) n = 2;
  else if (c == 0xE0) { n = 3; lo = 0xA0; }
  else if (c == 0xED) { n = 3; hi = 0x9F; }
  else if (c >= 0xE1 && c <= 0xEF) n = 3;
  else if (c == 0xF0) { n = 4; lo = 0x90; }
  else if (c == 0xF4) { n = 4; hi = 0x8F; }
  else if (c >= 0xF1 && c <= 0xF3) n = 4;
  else return 0;
  if ((size_t)(end - p) < n) return 0;
  if (p[1] < lo || p[1] > hi) return 0;
  for (size_t i = 2; i < n; i++) if (p[i] < 0x80 || p[i] > 0xBF) return 0;
  return n;
}

/*
 * Scans a string whose opening quote is just before *pp. On success *pp is past the closing quote.
 * Returns 0 when the string is malformed (unterminated, a raw control character, a bad escape).
 */
static int scan_string(const unsigned char **pp, const unsigned char *end, struct sink *s) {
  const unsigned char *p = *pp;
  for (;;) {
    if (p >= end) return 0;
    unsigned char c = *p;
    if (c == '"') {
      *pp = p + 1;
      return 1;
    }
    if (c < 0x20) return 0;
    if (c != '\\') {
      if (c >= 0x80 && s->check_utf8) {
        size_t n = utf8_sequence(p, end);
        if (n == 0) {
          s->bad_text = 1;
          n = 1;
        }
        for (size_t i = 0; i < n; i++) put(s, p[i]);
        p += n;
      } else {
        put(s, c);
        p++;
      }
      continue;
    }
    if (end - p < 2) return 0;
    unsigned char e = p[1];
    p += 2;
    switch (e) {
      case '"': put(s, '"'); break;
      case '\\': put(s, '\\'); break;
      case '/': put(s, '/'); break;
      case 'b': put(s, '\b'); break;
      case 'f': put(s, '\f'); break;
      case 'n': put(s, '\n'); break;
      case 'r': put(s, '\r'); break;
      case 't': put(s, '\t'); break;
      case 'u': {
        unsigned unit;
        if (!hex4(p, end, &unit)) return 0;
        p += 4;
        if (unit >= 0xD800 && unit <= 0xDBFF) {
          unsigned low;
          if (end - p >= 6 && p[0] == '\\' && p[1] == 'u' && hex4(p + 2, end, &low) && low >= 0xDC00 && low <= 0xDFFF) {
            p += 6;
            put_code_point(s, 0x10000 + (((uint32_t)unit - 0xD800) << 10) + ((uint32_t)low - 0xDC00));
          } else {
            /* A lone high surrogate; the next escape is scanned on its own. Its WTF-8 bytes
             * stand in for it, so a value that starts with one does not start with "/". */
            s->bad_text = 1;
            put_code_point(s, unit);
          }
        } else if (unit >= 0xDC00 && unit <= 0xDFFF) {
          s->bad_text = 1;
          put_code_point(s, unit);
        } else {
          put_code_point(s, unit);
        }
        break;
      }
      default:
        return 0;
    }
  }
}

static int scan_number(const unsigned char **pp, const unsigned char *end) {
  const unsigned char *p = *pp;
  if (p < end && *p == '-') p++;
  if (p >= end) return 0;
  if (*p == '0') {
    p++;
  } else if (*p >= '1' && *p <= '9') {
    while (p < end && *p >= '0' && *p <= '9') p++;
  } else {
    return 0;
  }
  if (p < end && *p == '.') {
    p++;
    if (p >= end || *p < '0' || *p > '9') return 0;
    while (p < end && *p >= '0' && *p <= '9') p++;
  }
  if (p < end && (*p == 'e' || *p == 'E')) {
    p++;
    if (p < end && (*p == '+' || *p == '-')) p++;
    if (p >= end || *p < '0' || *p > '9') return 0;
    while (p < end && *p >= '0' && *p <= '9') p++;
  }
  *pp = p;
  return 1;
}

static int scan_literal(const unsigned char **pp, const unsigned char *end, const char *word) {
  size_t n = strlen(word);
  if ((size_t)(end - *pp) < n || memcmp(*pp, word, n) != 0) return 0;
  *pp += n;
  return 1;
}

static const unsigned char *skip_space(const unsigned char *p, const unsigned char *end) {
  while (p < end && (*p == ' ' || *p == '\t' || *p == '\n' || *p == '\r')) p++;
  return p;
}

/* What the scanner expects next. */
enum expect { VALUE, VALUE_OR_CLOSE, KEY, KEY_OR_CLOSE, COLON, AFTER_VALUE };

/* What the value about to be scanned is to the search. */
enum role { OTHER, IPAM, SOCKET };

enum socket_state { NO_SOCKET, HAS_SOCKET, BAD_SOCKET };

enum warren_socket_answer warren_find_socket(const char *json, size_t len, char *out, size_t outlen) {
  const unsigned char *p = (const unsigned char *)json;
  const unsigned char *const end = p + len;
  /* Bit d-1 set: the container at depth d is an object; clear: an array. */
  unsigned char objects[(WARREN_MAX_DEPTH + 7) / 8];
  size_t depth = 0;
  enum expect expect = VALUE;
  enum role role = OTHER;
  int in_ipam = 0; /* the object at depth 2 is the value of the top-level "ipam" */
  enum socket_state socket = NO_SOCKET;
  const size_t path_cap = outlen > 0 ? outlen - 1 : 0;

  if (outlen > 0) out[0] = '\0';
  for (;;) {
    p = skip_space(p, end);
    switch (expect) {
      case VALUE_OR_CLOSE:
        if (p < end && *p == ']') goto close;
        expect = VALUE;
        /* fall through */
      case VALUE: {
        if (p >= end) goto malformed;
        const enum role this_role = role;
        role = OTHER;
        /* A new "ipam" value replaces what an earlier one named; so does a new "socket". */
        if (this_role != OTHER) socket = NO_SOCKET;
        unsigned char c = *p;
        if (c == '{' || c == '[') {
          if (depth == WARREN_MAX_DEPTH) {
            if (outlen > 0) out[0] = '\0';
            return WARREN_SOCKET_TOO_DEEP;
          }
          if (c == '{') objects[depth / 8] |= (unsigned char)(1u << (depth % 8));
          else objects[depth / 8] &= (unsigned char)~(1u << (depth % 8));
          depth++;
          p++;
          if (c == '{' && this_role == IPAM) in_ipam = 1;
          expect = c == '{' ? KEY_OR_CLOSE : VALUE_OR_CLOSE;
          continue;
        }
        int ok;
        if (c == '"') {
          p++;
          if (this_role == SOCKET) {
            struct sink s = {.decode = 1, .buf = out, .cap = path_cap, .first = -1, .check_utf8 = 1};
            ok = scan_string(&p, end, &s);
            if (ok && s.first == '/') {
              if (s.nul || s.bad_text || s.len > WARREN_SOCKET_PATH_MAX || s.len > path_cap) {
                socket = BAD_SOCKET;
              } else {
                out[s.len] = '\0';
                socket = HAS_SOCKET;
              }
            }
          } else {
            struct sink s = {.first = -1};
            ok = scan_string(&p, end, &s);
          }
        } else if (c == '-' || (c >= '0' && c <= '9')) {
          ok = scan_number(&p, end);
        } else if (c == 't') {
          ok = scan_literal(&p, end, "true");
        } else if (c == 'f') {
          ok = scan_literal(&p, end, "false");
        } else if (c == 'n') {
          ok = scan_literal(&p, end, "null");
        } else {
          ok = 0;
        }
        if (!ok) goto malformed;
        expect = AFTER_VALUE;
        continue;
      }
      case KEY_OR_CLOSE:
        if (p < end && *p == '}') goto close;
        /* fall through */
      case KEY: {
        if (p >= end || *p != '"') goto malformed;
        p++;
        const int wanted = depth == 1 || (in_ipam && depth == 2);
        char name[8];
        struct sink s = {.decode = wanted, .buf = name, .cap = sizeof name, .first = -1};
        if (!scan_string(&p, end, &s)) goto malformed;
        if (depth == 1 && s.len == 4 && memcmp(name, "ipam", 4) == 0) role = IPAM;
        else if (depth == 2 && in_ipam && s.len == 6 && memcmp(name, "socket", 6) == 0) role = SOCKET;
        else role = OTHER;
        expect = COLON;
        continue;
      }
      case COLON:
        if (p >= end || *p != ':') goto malformed;
        p++;
        expect = VALUE;
        continue;
      case AFTER_VALUE: {
        if (depth == 0) {
          if (p != end) goto malformed;
          switch (socket) {
            case HAS_SOCKET: return WARREN_SOCKET_FOUND;
            case BAD_SOCKET: if (outlen > 0) out[0] = '\0'; return WARREN_SOCKET_UNUSABLE;
            case NO_SOCKET: break;
          }
          if (outlen > 0) out[0] = '\0';
          return WARREN_SOCKET_NOT_FOUND;
        }
        if (p >= end) goto malformed;
        const int in_object = (objects[(depth - 1) / 8] >> ((depth - 1) % 8)) & 1;
        if (*p == ',') {
          p++;
          expect = in_object ? KEY : VALUE;
          continue;
        }
        if (*p == (in_object ? '}' : ']')) goto close;
        goto malformed;
      }
    }
  close:
    /* p is at the '}' or ']' that matches the container at `depth`. */
    if (depth == 2) in_ipam = 0;
    depth--;
    p++;
    expect = AFTER_VALUE;
  }
malformed:
  if (outlen > 0) out[0] = '\0';
  return WARREN_SOCKET_NOT_FOUND;
}
