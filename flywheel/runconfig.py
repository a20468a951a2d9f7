"""The settings of one flywheel pass (`RunConfig`): one owner below the flows, so a config built in code
(a demo, a bench, a study, a test) equals the command line's for the same inputs.

The model's profile defaults are applied here, once: a run not told its budget gets its model's
(`flywheel.modelzoo.PackagedModel.budget`: 512 for a chat model that reasons, else
`config.DEFAULT_BUDGET`). The numbers the catalog records are range-checked here, once, and the one check
against the model's window is `RunConfig.check_window`.

    >>> RunConfig(problems="gen:linear?n=5&seed=1", model="qwen2.5-coder-0.5b").budget   # doctest: +SKIP
    512
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, model_validator

from flywheel import config, modelzoo
from flywheel.decode import DEFAULT_SLOTS, DecodeSchedule
from flywheel.energy import EnergyConfig
from flywheel.errors import InputError
from flywheel.router import RouterConfig
from verifiers import VerifierConfig


class RunConfig(BaseModel):
    """The inputs of one flywheel pass; frozen, so it can be recorded and compared.

    `router`, `energy` and `verifier` are the settings that decide a run's results and figures;
    the catalog records them with the run (`settings()`), and a run is resumed only under the
    same ones. `near_members=N` may be given flat: it is the router's `near_members`.
    """

    model_config = ConfigDict(frozen=True)

    problems: str = Field(description="champ, a .jsonl/.csv/.parquet path, or gen:FAMILY?n=N&seed=S")
    budget: int = Field(config.DEFAULT_BUDGET, description="decode-token budget per attempt (not given, or None: "
                        "the model profile's)")
    attempts: int = Field(config.DEFAULT_ATTEMPTS, description="attempts per problem; >1 samples with seeds")
    run_budget: int | None = Field(None, description="decode-token budget for the whole run")
    no_graft: bool = False
    run_id: str | None = Field(None, description="resume this run (attempts already recorded are skipped)")
    seed: int = Field(config.DEFAULT_SEED, description="base sampling seed: attempt k samples with seed + k")
    limit: int | None = Field(None, ge=1, description="only the first N problems of the set")
    deposit: bool = Field(True, description="deposit the model's own verified solutions of new problems")
    model: str = Field(default_factory=lambda: config.model_name())
    library: str = Field(default_factory=lambda: str(config.library_root()))
    db_url: str | None = None
    task_runner: config.TaskRunnerKind = Field(config.DEFAULT_TASK_RUNNER, description="thread: the pass in this "
                                        "process; dask: one Prefect task per shard of problems on Dask worker processes")
    dask_address: str | None = Field(None, description="scheduler of an existing Dask cluster, e.g. "
                                     "tcp://dask-scheduler:8786 (default: a temporary local cluster)")
    dask_workers: int | None = Field(None, ge=1, description="worker processes of the temporary local Dask "
                                     f"cluster (default {config.DEFAULT_DASK_WORKERS}); only with the dask runner")
    dtype: config.RunDType = Field(config.DEFAULT_DTYPE, description="engine dtype; bfloat16 is opt-in "
                                                  "(its own fingerprint: float32 artifacts are refused)")
    starter: bool = Field(False, description="seed an empty library with the starter library (flows.starter) "
                          "before the pass; `flywheel run` turns it on unless --no-starter")
    calculator: bool = Field(config.DEFAULT_CALCULATOR, description="hand 'expression =' arithmetic to the "
                             "engine's exact calculator (flywheel.calculator); part of the decode schedule")
    grounding: bool = Field(config.DEFAULT_GROUNDING, description="a worked solution's operands come from its "
                            "problem or earlier work, its final answer is its last result (flywheel.grounding); "
                            "part of the decode schedule")
    until_verified: bool = Field(False, description="attempts until verified: the first attempt is greedy, each "
                                 "further one (sampled, seed + k) is decoded only after the last failed, up to "
                                 "--attempts; recorded with the run's settings")
    study: dict[str, Any] | None = Field(None, description="the shape of the study this run belongs to (train and "
                                         "held-out sets, passes, curated, arms, samples): recorded with the run's "
                                         "settings, so a study resumed in another shape is refused")
    slots: int = Field(DEFAULT_SLOTS, ge=1, le=config.MAX_SLOTS, description="decode slots: attempts decoded together "
                       "(a slot's bits do not depend on this number; see flywheel.decode)")
    router: RouterConfig = Field(default_factory=RouterConfig, description="routing thresholds and index; "
                                 "near_members: related verified solutions grafted together on a near route")
    energy: EnergyConfig = Field(default_factory=EnergyConfig.from_env,
                                 description="energy metering (FLYWHEEL_CPU_WATTS, FLYWHEEL_ENERGY_SOURCE)")
    verifier: VerifierConfig = Field(default_factory=VerifierConfig,
                                     description="the verifier's bounds and tolerance, for every verdict of the run")

    @model_validator(mode="before")
    @classmethod
    def _budget_is_the_profile_s_unless_given(cls, data: Any) -> Any:
        """The one place a budget is defaulted: not given (or None) is the model profile's own."""
        if not isinstance(data, dict) or data.get("budget") is not None:
            return data
        model = data.get("model") or config.model_name()
        return {**data, "budget": modelzoo.profile_of(model).budget}

    @model_validator(mode="before")
    @classmethod
    def _near_members_is_a_router_setting(cls, data: Any) -> Any:
        if not isinstance(data, dict) or "near_members" not in data:
            return data
        data = dict(data)
        members = data.pop("near_members")
        if members is not None:
            router = data.get("router") or RouterConfig()
            data["router"] = ({**router, "near_members": members} if isinstance(router, dict)
                              else replace(router, near_members=members))
        return data

    @model_validator(mode="after")
    def _numbers_fit_the_catalog(self) -> RunConfig:
        """Every number the catalog records is bounded here, before a run starts: a value its
        INTEGER columns cannot hold would otherwise fail the recording after the decoding."""
        bounds = {"budget": (self.budget, 0, config.MAX_BUDGET), "attempts": (self.attempts, 1, config.MAX_ATTEMPTS),
                  "run_budget": (self.run_budget, 0, config.MAX_DB_INT), "seed": (self.seed, 0, config.MAX_SEED)}
        for name, (value, low, high) in bounds.items():
            if value is not None and not low <= value <= high:
                raise InputError(f"{name} {value} is outside {low}..{high:,}",
                                 hint=f"give --{name.replace('_', '-')} between {low} and {high:,}")
        return self

    @model_validator(mode="after")
    def _dask_options_need_dask(self) -> RunConfig:
        if self.task_runner != "dask" and (self.dask_address is not None or self.dask_workers is not None):
            raise InputError(f"dask_address and dask_workers apply only to the dask task runner, "
                             f"not {self.task_runner!r}", hint="add --task-runner dask, or drop the --dask-* options")
        if self.dask_address is not None and self.dask_workers is not None:
            raise InputError(f"dask_workers sizes a temporary local cluster; the cluster at {self.dask_address} "
                             "has its own workers", hint="drop --dask-workers, or drop --dask-address")
        if not 1 <= self.router.near_members <= config.MAX_NEAR_MEMBERS:
            raise InputError(f"near_members {self.router.near_members} is outside 1..{config.MAX_NEAR_MEMBERS}",
                             hint=f"graft between 1 and {config.MAX_NEAR_MEMBERS} related solutions on a near route")
        return self

    def check_window(self, window: int | None) -> None:
        """Refuse a budget longer than the model's context `window` (None or 0: the model names none): the one
        window check of a run's settings, made before anything is decoded."""
        if window and self.budget > window:
            raise InputError(f"--budget {self.budget:,} is longer than {self.model}'s {window:,}-token window",
                             hint=f"a decode budget of at most {window:,} tokens")

    @property
    def near_members(self) -> int:
        """Related verified solutions grafted together on a near route (the router's setting)."""
        return self.router.near_members

    @property
    def local_workers(self) -> int:
        """Worker processes of the temporary local Dask cluster."""
        return self.dask_workers or config.DEFAULT_DASK_WORKERS

    def schedule(self, weights: str = "fp32") -> DecodeSchedule:
        """The decode schedule this pass runs and records (`DecodeSchedule.of_run`: the one builder); `weights`
        is what its engine runs (`EngineSettings.weights`, known once the engine is loaded)."""
        return DecodeSchedule.of_run(self.slots, self.dtype, calculator=self.calculator, grounding=self.grounding,
                                     weights=weights)

    def settings(self, prompt_format: str | None = None) -> dict[str, Any]:
        """The router, energy and verifier settings as plain JSON values: what the catalog records per run,
        with the sampling seed and, given, the prompt format's tag (its name, version and template hash).

        Example:
            >>> RunConfig(problems="champ").settings()["router"]["near_threshold"]   # doctest: +SKIP
            0.5
        """
        out = self.model_dump(mode="json", include={"router", "energy", "verifier", "seed"})
        if prompt_format is not None:
            out["prompt_format"] = prompt_format
        if self.until_verified:   # absent when off, so runs recorded before the option resume as they were
            out["attempt_policy"] = {"until_verified": True}
        if self.study is not None:
            out["study"] = self.study
        return out
