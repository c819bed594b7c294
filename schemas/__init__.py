"""rlgen.schemas"""
