/* The viprof subcommands, all in cli/ on top of the libraries they drive. Each
 * returns the process exit status (0 success, 1 runtime failure, 2 usage error). */
#ifndef VIPROF_COMMANDS_H
#define VIPROF_COMMANDS_H

#include "common/paths.h"   /* viprof_agent_path(), viprof_self_path() */

int cmd_probe(int argc, char **argv);   /* cli/probe_cmd.c: hv-glue/probe.h */
int cmd_record(int argc, char **argv);  /* cli/record_cmd.c: recorder/recorder.h */
int cmd_report(int argc, char **argv);  /* cli/report_cmd.c: postproc/ */
int cmd_maps(int argc, char **argv);    /* cli/maps_cmd.c: maps/ */
int cmd_attach(int argc, char **argv);  /* cli/attach_cmd.c: recorder/jvm_attach.h */
int cmd_stat(int argc, char **argv);    /* cli/stat_cmd.c: hv-glue/ */
int cmd_serve(int argc, char **argv);   /* cli/serve_cmd.c: daemon/ */
int cmd_fleet(int argc, char **argv);   /* cli/fleet_cmd.c: fleet/ (ClickHouse) */

#endif
