"""rlgen.codegen"""
