/* The viprof subcommands. Each lives with the component it drives and returns the
 * process exit status (0 success, 1 runtime failure, 2 usage error). */
#ifndef VIPROF_COMMANDS_H
#define VIPROF_COMMANDS_H

int cmd_probe(int argc, char **argv);   /* hv-glue/probe_cmd.c */
int cmd_record(int argc, char **argv);  /* daemon/record_cmd.c */
int cmd_report(int argc, char **argv);  /* postproc/report_cmd.c */
int cmd_maps(int argc, char **argv);    /* maps/maps_cmd.c */
int cmd_attach(int argc, char **argv);  /* daemon/attach_cmd.c */
int cmd_stat(int argc, char **argv);    /* hv-glue/stat_cmd.c */
int cmd_serve(int argc, char **argv);   /* cli/serve_cmd.c */

/* Where the installed JVMTI agent is (next to the viprof binary, or the build tree). */
const char *viprof_agent_path(void);
/* Absolute path of the running viprof executable. */
const char *viprof_self_path(void);

#endif
