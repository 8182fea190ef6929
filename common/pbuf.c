#include "common/pbuf.h"

#include <errno.h>
#include <string.h>

#include "common/util.h"

void vp_buf__put(struct vp_buf *b, const void *p, size_t n)
{
	if (b->err || !n)
		return;
	if (vp_grow((void **)&b->b, &b->cap, b->len + n, 1)) {
		b->err = -ENOMEM;
		return;
	}
	memcpy(b->b + b->len, p, n);
	b->len += n;
}

void vp_buf__u8(struct vp_buf *b, uint8_t v)
{
	vp_buf__put(b, &v, 1);
}

void vp_buf__be(struct vp_buf *b, uint64_t v, int bytes)
{
	uint8_t t[8];
	for (int i = 0; i < bytes; i++)
		t[i] = (uint8_t)(v >> (8 * (bytes - 1 - i)));
	vp_buf__put(b, t, (size_t)bytes);
}

/* Both varints: groups of 7 bits, low first, at most max - 1 of them before a last byte
 * that holds what is left (7 bits for protobuf's ten, 8 for JFR's nine). */
static size_t leb128(uint8_t *t, uint64_t v, size_t max)
{
	size_t n = 0;
	while (n + 1 < max && v >= 0x80) {
		t[n++] = (uint8_t)(v | 0x80);
		v >>= 7;
	}
	t[n++] = (uint8_t)v;
	return n;
}

void vp_buf__varint(struct vp_buf *b, uint64_t v)
{
	uint8_t t[10];
	vp_buf__put(b, t, leb128(t, v, 10));
}

void vp_buf__varint9(struct vp_buf *b, uint64_t v)
{
	uint8_t t[9];
	vp_buf__put(b, t, leb128(t, v, 9));
}

size_t vp_varint_len(uint64_t v)
{
	uint8_t t[10];
	return leb128(t, v, 10);
}

size_t vp_varint9_len(uint64_t v)
{
	uint8_t t[9];
	return leb128(t, v, 9);
}

void vp_pb__tag(struct vp_buf *b, unsigned field, unsigned wire_type)
{
	vp_buf__varint(b, (uint64_t)field << 3 | wire_type);
}

void vp_pb__uint(struct vp_buf *b, unsigned field, uint64_t v)
{
	if (!v)
		return;
	vp_pb__tag(b, field, VP_PB_VARINT);
	vp_buf__varint(b, v);
}

void vp_pb__int(struct vp_buf *b, unsigned field, int64_t v)
{
	vp_pb__uint(b, field, (uint64_t)v);
}

void vp_pb__fixed64(struct vp_buf *b, unsigned field, uint64_t v)
{
	if (!v)
		return;
	uint8_t t[8];
	for (int i = 0; i < 8; i++)
		t[i] = (uint8_t)(v >> (8 * i));
	vp_pb__tag(b, field, VP_PB_FIXED64);
	vp_buf__put(b, t, 8);
}

void vp_pb__bytes(struct vp_buf *b, unsigned field, const void *p, size_t n)
{
	vp_pb__tag(b, field, VP_PB_LEN);
	vp_buf__varint(b, n);
	vp_buf__put(b, p, n);
}

void vp_pb__str(struct vp_buf *b, unsigned field, const char *s)
{
	vp_pb__bytes(b, field, s ? s : "", s ? strlen(s) : 0);
}

void vp_pb__msg(struct vp_buf *b, unsigned field, struct vp_buf *child)
{
	if (child->err && !b->err)
		b->err = child->err;
	vp_pb__bytes(b, field, child->b, child->len);
	child->len = 0;
	child->err = 0;
}

/* The packed forms: the payload's length is the sum of the varints' lengths, so the
 * values are written straight into b without a buffer of their own. */
void vp_pb__packed_u64(struct vp_buf *b, unsigned field, const uint64_t *v, size_t n)
{
	size_t len = 0;
	if (!n)
		return;
	for (size_t i = 0; i < n; i++)
		len += vp_varint_len(v[i]);
	vp_pb__tag(b, field, VP_PB_LEN);
	vp_buf__varint(b, len);
	for (size_t i = 0; i < n; i++)
		vp_buf__varint(b, v[i]);
}

void vp_pb__packed_i64(struct vp_buf *b, unsigned field, const int64_t *v, size_t n)
{
	size_t len = 0;
	if (!n)
		return;
	for (size_t i = 0; i < n; i++)
		len += vp_varint_len((uint64_t)v[i]);
	vp_pb__tag(b, field, VP_PB_LEN);
	vp_buf__varint(b, len);
	for (size_t i = 0; i < n; i++)
		vp_buf__varint(b, (uint64_t)v[i]);
}

void vp_pb__packed_i32(struct vp_buf *b, unsigned field, const int32_t *v, size_t n)
{
	size_t len = 0;
	if (!n)
		return;
	for (size_t i = 0; i < n; i++)
		len += vp_varint_len((uint64_t)(int64_t)v[i]);
	vp_pb__tag(b, field, VP_PB_LEN);
	vp_buf__varint(b, len);
	for (size_t i = 0; i < n; i++)
		vp_buf__varint(b, (uint64_t)(int64_t)v[i]);
}
