/*
 * obload.h — the model a test built with sim/onnx_build.h, loaded by the simulator, for the
 * cmocka unit tests of sim/.
 */
#ifndef IPUOF_OBLOAD_H
#define IPUOF_OBLOAD_H

struct sim_ob;
struct sim_model;

/* Serializes b, frees it and loads the bytes with sim_model_load; fails the running
 * cmocka test (with the loader's sentence) when either step fails. The caller frees the
 * model with sim_model_free. */
struct sim_model *test_ob_load(struct sim_ob *b);

#endif
