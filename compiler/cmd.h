/* cmd.h - the reshardc subcommands; main.c dispatches to them. Each returns the process exit status:
 * 0 success, 1 invalid input (layout or plan), 2 bad command line. */
#ifndef RS_CMD_H
#define RS_CMD_H

int rs_cmd_compile(int argc, char **argv); /* reshardc model.layout -o plan.bin [-D N=V]... [--staging B] */
int rs_cmd_check(int argc, char **argv);   /* reshardc check model.layout [-D N=V]... */
int rs_cmd_verify(int argc, char **argv);  /* reshardc verify plan.bin */
int rs_cmd_dump(int argc, char **argv);    /* reshardc dump plan.bin [--rank N] */
int rs_cmd_diff(int argc, char **argv);    /* reshardc diff a.bin b.bin */
int rs_cmd_stats(int argc, char **argv);   /* reshardc stats plan.bin [--json] [--svg FILE] */

#endif
