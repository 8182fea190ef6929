/* common/pbuf: the byte encoder of the pprof, OTLP and JFR writers. Each case is the
 * exact bytes the protobuf wire format (and JFR's nine-byte varint) gives for a value,
 * worked out by hand from the spec: groups of 7 bits, low first. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/pbuf.h"
#include "test.h"

#define ASSERT_BYTES(buf, ...) do { const uint8_t _x[] = { __VA_ARGS__ }; \
	ASSERT_EQ((buf)->len, sizeof(_x)); \
	for (size_t _i = 0; _i < sizeof(_x); _i++) \
		if ((buf)->b[_i] != _x[_i]) \
			FAIL("byte %zu: 0x%02x, expected 0x%02x", _i, (buf)->b[_i], _x[_i]); \
	(buf)->len = 0; } while (0)

int main(void)
{
	struct vp_buf b = { 0 }, c = { 0 };

	vp_buf__varint(&b, 0);
	ASSERT_BYTES(&b, 0x00);
	vp_buf__varint(&b, 127);
	ASSERT_BYTES(&b, 0x7f);
	vp_buf__varint(&b, 300);
	ASSERT_BYTES(&b, 0xac, 0x02);
	vp_buf__varint(&b, UINT64_MAX);   /* ten bytes, the last holding one bit */
	ASSERT_BYTES(&b, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x01);
	ASSERT_EQ(vp_varint_len(UINT64_MAX), 10);
	ASSERT_EQ(vp_varint_len(1ull << 56), 9);
	ASSERT_EQ(vp_varint_len(300), 2);

	/* JFR's: the same below 2^56, then a 9th byte of 8 bits. */
	vp_buf__varint9(&b, 300);
	ASSERT_BYTES(&b, 0xac, 0x02);
	vp_buf__varint9(&b, UINT64_MAX);
	ASSERT_BYTES(&b, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff);
	ASSERT_EQ(vp_varint9_len(UINT64_MAX), 9);
	ASSERT_EQ(vp_varint9_len((1ull << 56) - 1), 8);

	vp_buf__be(&b, 0x0102030405060708ull, 8);
	ASSERT_BYTES(&b, 1, 2, 3, 4, 5, 6, 7, 8);
	vp_buf__be(&b, 0x0201, 2);
	ASSERT_BYTES(&b, 2, 1);

	/* Fields: zero scalars left out, negative ints as ten bytes. */
	vp_pb__uint(&b, 1, 0);
	vp_pb__int(&b, 2, 0);
	vp_pb__fixed64(&b, 3, 0);
	ASSERT_EQ(b.len, 0);
	vp_pb__uint(&b, 1, 150);
	ASSERT_BYTES(&b, 0x08, 0x96, 0x01);
	vp_pb__int(&b, 2, -1);
	ASSERT_BYTES(&b, 0x10, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x01);
	vp_pb__fixed64(&b, 3, 0x0102);
	ASSERT_BYTES(&b, 0x19, 0x02, 0x01, 0, 0, 0, 0, 0, 0);
	vp_pb__str(&b, 2, "testing");
	ASSERT_BYTES(&b, 0x12, 0x07, 't', 'e', 's', 't', 'i', 'n', 'g');
	vp_pb__str(&b, 6, "");            /* strings are always framed, "" too */
	ASSERT_BYTES(&b, 0x32, 0x00);
	vp_pb__str(&b, 6, NULL);
	ASSERT_BYTES(&b, 0x32, 0x00);

	/* A message is framed, and its buffer emptied for the next one. */
	vp_pb__uint(&c, 1, 150);
	vp_pb__msg(&b, 3, &c);
	ASSERT_BYTES(&b, 0x1a, 0x03, 0x08, 0x96, 0x01);
	ASSERT_EQ(c.len, 0);
	vp_pb__msg(&b, 3, &c);            /* an empty message is still there */
	ASSERT_BYTES(&b, 0x1a, 0x00);

	/* Packed: one length for all the values; nothing for none. */
	const uint64_t u[] = { 3, 270, 86942 };
	vp_pb__packed_u64(&b, 4, u, 3);
	ASSERT_BYTES(&b, 0x22, 0x06, 0x03, 0x8e, 0x02, 0x9e, 0xa7, 0x05);
	vp_pb__packed_u64(&b, 4, u, 0);
	ASSERT_EQ(b.len, 0);
	const int64_t i64[] = { -1, 1 };
	vp_pb__packed_i64(&b, 2, i64, 2);
	ASSERT_BYTES(&b, 0x12, 0x0b, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x01, 0x01);
	const int32_t i32[] = { 1, 300 };
	vp_pb__packed_i32(&b, 1, i32, 2);
	ASSERT_BYTES(&b, 0x0a, 0x03, 0x01, 0xac, 0x02);

	/* The error sticks and moves from a child to its parent. */
	c.err = -ENOMEM;
	vp_pb__msg(&b, 1, &c);
	ASSERT_EQ(b.err, -ENOMEM);
	ASSERT_EQ(c.err, 0);
	size_t len = b.len;
	vp_buf__u8(&b, 1);
	ASSERT_EQ(b.len, len);
	free(b.b);
	free(c.b);
	printf("ok\n");
	return 0;
}
