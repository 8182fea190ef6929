/* OTLP Profiles (opentelemetry.proto.profiles.v1development, the layout of
 * opentelemetry-proto 1.9: one dictionary per request with tables whose entry 0 is the
 * null entry, stacks in a stack table, samples referring to a stack and to attributes by
 * index) encoded by hand as an ExportProfilesServiceRequest, the body of an OTLP/HTTP
 * protobuf POST to /v1development/profiles. tests/otlp-profiles.proto is the schema the
 * test decodes it with (protoc --decode), written from the published one. */
#ifndef VIPROF_SERVICE_OTLP_H
#define VIPROF_SERVICE_OTLP_H

#include <stddef.h>
#include <stdint.h>

struct vp_profile;

struct vp_otlp_meta {
	const char *host;           /* resource host.name */
	const char *service;        /* resource service.name */
	uint64_t time_unix_nano;    /* the profile's start */
	uint64_t duration_nano;
};

/* The profile's first event as one OTLP profile: sample type cpu/nanoseconds for a
 * clock event (its weight), else the event's name/count; one Location and Function per
 * frame (frames carry no addresses here), a Stack per stack (leaf first), and per sample
 * the attributes process.pid, process.executable.name, thread.id, thread.name. 0 or
 * -ENOMEM; *buf is malloc'd. */
int vp_otlp__encode(const struct vp_profile *p, const struct vp_otlp_meta *m, uint8_t **buf, size_t *len);

#endif
