/* Typed asserts that print both values, file and line; a test exits 0 on success,
 * 1 on failure, and TEST_SKIP (77, ctest SKIP_RETURN_CODE) when it cannot run here. */
#ifndef VIPROF_TEST_H
#define VIPROF_TEST_H

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define TEST_SKIP 77

#define SKIP(...) do { fprintf(stderr, "SKIP: " __VA_ARGS__); fputc('\n', stderr); exit(TEST_SKIP); } while (0)
#define FAIL(...) do { fprintf(stderr, "%s:%d: FAIL: ", __FILE__, __LINE__); \
	fprintf(stderr, __VA_ARGS__); fputc('\n', stderr); exit(1); } while (0)

/* 1 when x is a floating-point expression. The integer asserts convert both sides to
 * int64_t/uint64_t, so ASSERT_GT(0.95, 0.8) would compare 0 with 0 and fail to fail:
 * they refuse floating arguments at compile time (use the _F family or ASSERT_NEAR),
 * and scripts/check-float-asserts.py says the same in the unit lane. */
#define TEST_IS_FLOAT(x) _Generic((x), float: 1, double: 1, long double: 1, default: 0)
#define ASSERT_NOT_FLOAT(a, b) _Static_assert(!TEST_IS_FLOAT(a) && !TEST_IS_FLOAT(b), \
	"a floating value in an integer assert: use ASSERT_GT_F, ASSERT_GE_F, ASSERT_LT_F, ASSERT_LE_F or ASSERT_NEAR")

#define ASSERT_BASE(a, op, b, type, fmt) do { ASSERT_NOT_FLOAT(a, b); type _a = (type)(a); type _b = (type)(b); \
	if (!(_a op _b)) FAIL("%s %s %s (" fmt " vs " fmt ")", #a, #op, #b, _a, _b); } while (0)
/* Comparisons that keep doubles (and print them with their fraction). */
#define ASSERT_BASE_F(a, op, b) do { double _a = (double)(a); double _b = (double)(b); \
	if (!(_a op _b)) FAIL("%s %s %s (%.6g vs %.6g)", #a, #op, #b, _a, _b); } while (0)
#define ASSERT_GT_F(a, b) ASSERT_BASE_F(a, >, b)
#define ASSERT_GE_F(a, b) ASSERT_BASE_F(a, >=, b)
#define ASSERT_LT_F(a, b) ASSERT_BASE_F(a, <, b)
#define ASSERT_LE_F(a, b) ASSERT_BASE_F(a, <=, b)

#define ASSERT_EQ(a, b) ASSERT_BASE(a, ==, b, int64_t, "%" PRId64)
#define ASSERT_NE(a, b) ASSERT_BASE(a, !=, b, int64_t, "%" PRId64)
#define ASSERT_GT(a, b) ASSERT_BASE(a, >, b, int64_t, "%" PRId64)
#define ASSERT_GE(a, b) ASSERT_BASE(a, >=, b, int64_t, "%" PRId64)
#define ASSERT_LT(a, b) ASSERT_BASE(a, <, b, int64_t, "%" PRId64)
#define ASSERT_LE(a, b) ASSERT_BASE(a, <=, b, int64_t, "%" PRId64)
#define ASSERT_UEQ(a, b) ASSERT_BASE(a, ==, b, uint64_t, "%" PRIu64)
#define ASSERT_DBL_NEAR(a, b, tol) do { double _a = (a), _b = (b); \
	if (!(_a - _b <= (tol) && _b - _a <= (tol))) FAIL("%s ~ %s (%.3f vs %.3f, tol %.3f)", #a, #b, _a, _b, (double)(tol)); } while (0)
#define ASSERT_NEAR(a, b, tol) ASSERT_DBL_NEAR(a, b, tol)
#define ASSERT_OK(e) do { long _e = (long)(e); if (_e != 0) FAIL("%s returned %ld (%s)", #e, _e, _e < 0 ? strerror((int)-_e) : ""); } while (0)
#define ASSERT_TRUE(c) do { if (!(c)) FAIL("expected true: %s", #c); } while (0)
#define ASSERT_FALSE(c) do { if (c) FAIL("expected false: %s", #c); } while (0)
#define ASSERT_NOT_NULL(p) do { if ((p) == NULL) FAIL("%s is NULL", #p); } while (0)
#define ASSERT_NULL(p) do { if ((p) != NULL) FAIL("%s is not NULL", #p); } while (0)
#define ASSERT_STREQ(a, b) do { const char *_a = (a), *_b = (b); \
	if (!_a || !_b || strcmp(_a, _b)) FAIL("%s == %s (\"%s\" vs \"%s\")", #a, #b, _a ? _a : "(null)", _b ? _b : "(null)"); } while (0)
#define ASSERT_CONTAINS(hay, needle) do { const char *_h = (hay), *_n = (needle); \
	if (!_h || !strstr(_h, _n)) FAIL("%s does not contain \"%s\"", #hay, _n); } while (0)

#define REQUIRE_ROOT() do { if (geteuid() != 0) SKIP("needs root"); } while (0)

#endif
