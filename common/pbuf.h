/* The one binary encoder the report writers build on: a growable byte buffer whose error
 * sticks, as vp_out's does, base-128 varints, and protocol buffers' fields on top of
 * them (pprof's Profile, OTLP's ExportProfilesServiceRequest). JFR writes the same
 * varints, capped at nine bytes.
 *
 * Protobuf messages are built inside out: a nested message is written into a buffer of
 * its own, then framed (tag, length) into its parent with vp_pb__msg. Fields are written
 * as proto3 encoders (protobuf-c, Go's) write them: zero scalars left out (vp_pb__uint, vp_pb__int,
 * vp_pb__fixed64), strings, bytes and messages always framed, repeated scalars packed. */
#ifndef VIPROF_COMMON_PBUF_H
#define VIPROF_COMMON_PBUF_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* Zero-initialise with {0}; free(b.b) when done. err is 0 or -ENOMEM, from the first
 * failed allocation on; every later write is then a no-op. */
struct vp_buf {
	uint8_t *b;
	size_t len, cap;
	int err;
};

void vp_buf__put(struct vp_buf *b, const void *p, size_t n);
void vp_buf__u8(struct vp_buf *b, uint8_t v);
/* v's low bytes, most significant first. */
void vp_buf__be(struct vp_buf *b, uint64_t v, int bytes);
/* Base-128, low group first, the high bit of a byte saying another follows: protobuf's
 * varint, 1 to 10 bytes. */
void vp_buf__varint(struct vp_buf *b, uint64_t v);
size_t vp_varint_len(uint64_t v);
/* JFR's compressed integer: the same, but a 9th byte carries a full 8 bits, so that a
 * 64-bit value takes at most 9 bytes. Equal to the varint below 2^56. */
void vp_buf__varint9(struct vp_buf *b, uint64_t v);
size_t vp_varint9_len(uint64_t v);

enum { VP_PB_VARINT = 0, VP_PB_FIXED64 = 1, VP_PB_LEN = 2 };

void vp_pb__tag(struct vp_buf *b, unsigned field, unsigned wire_type);
/* uint32/uint64/int32/int64/bool fields; left out when zero. Negative int32/int64 values
 * are ten-byte varints of their two's complement, as protobuf has them. */
void vp_pb__uint(struct vp_buf *b, unsigned field, uint64_t v);
void vp_pb__int(struct vp_buf *b, unsigned field, int64_t v);
void vp_pb__fixed64(struct vp_buf *b, unsigned field, uint64_t v);
void vp_pb__bytes(struct vp_buf *b, unsigned field, const void *p, size_t n);
void vp_pb__str(struct vp_buf *b, unsigned field, const char *s);   /* NULL = "" */
/* Frames child into b as message field, then empties child (its error moves to b) so
 * that it can be reused for the next one. */
void vp_pb__msg(struct vp_buf *b, unsigned field, struct vp_buf *child);
/* Packed repeated scalars: left out when n is 0. */
void vp_pb__packed_u64(struct vp_buf *b, unsigned field, const uint64_t *v, size_t n);
void vp_pb__packed_i64(struct vp_buf *b, unsigned field, const int64_t *v, size_t n);
void vp_pb__packed_i32(struct vp_buf *b, unsigned field, const int32_t *v, size_t n);

#endif
