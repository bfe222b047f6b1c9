/*
 * check.h — the one CHECK macro of the C tests (included by each test_*.c; it
 * defines its counters, so include it once per test program).
 *
 *   CHECK(cond, "printf format", args...)   counts a pass, or prints the failed
 *                                           condition with file:line and a message
 *   return check_report("test_name");       prints "<name>: N passed, M failed",
 *                                           exit status 1 on any failure
 */
#ifndef BP_TEST_CHECK_H
#define BP_TEST_CHECK_H

#include <stdio.h>

static int g_fail, g_pass;
#define CHECK(cond, ...)                                                   \
    do {                                                                   \
        if (cond) {                                                        \
            g_pass++;                                                      \
        } else {                                                           \
            g_fail++;                                                      \
            fprintf(stderr, "FAIL %s:%d: %s: ", __FILE__, __LINE__, #cond); \
            fprintf(stderr, __VA_ARGS__);                                  \
            fputc('\n', stderr);                                           \
        }                                                                  \
    } while (0)

static inline int check_report(const char *name)
{
    printf("%s: %d passed, %d failed\n", name, g_pass, g_fail);
    return g_fail ? 1 : 0;
}

#endif /* BP_TEST_CHECK_H */
