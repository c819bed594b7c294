"""rlgen.dsl"""
