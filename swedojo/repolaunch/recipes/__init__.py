"""The table of language recipes: every place that needs a language's rules or layers asks it.

A new language is a `LanguageRecipe` subclass in a module of its own and one `register` call
below. `recipes()` lists the registered ones in detection priority order; `recipe_for` finds the
recipe of a language, `recipe_of` the one that builds an analysis.
"""

from __future__ import annotations

from swedojo.repolaunch.analysis import RepoAnalysis
from swedojo.repolaunch.recipes.base import LanguageRecipe
from swedojo.repolaunch.recipes.go import GoRecipe
from swedojo.repolaunch.recipes.java import JavaRecipe
from swedojo.repolaunch.recipes.native import NativeRecipe
from swedojo.repolaunch.recipes.node import NodeRecipe
from swedojo.repolaunch.recipes.python import PythonRecipe
from swedojo.repolaunch.recipes.rust import RustRecipe


class UnsupportedLanguageError(ValueError):
    """No recipe for this language yet (the same on every backend); the message lists the ones there are."""


_recipes: list[LanguageRecipe] = []


def register(recipe: LanguageRecipe) -> None:
    """Make `recipe` the one for its languages (replacing a recipe registered for any of them)."""
    unregister(*recipe.languages)
    _recipes.append(recipe)
    _recipes.sort(key=lambda known: known.priority)


def unregister(*languages: str) -> None:
    """Drop the recipes serving any of `languages`."""
    _recipes[:] = [known for known in _recipes if not set(known.languages) & set(languages)]


def recipes() -> tuple[LanguageRecipe, ...]:
    """The registered recipes, in detection priority order (lowest first)."""
    return tuple(_recipes)


def _offered() -> str:
    """The languages with a recipe: "python, go, java with maven and c"."""
    names = [f"{language} with {' or '.join(recipe.build_systems)}" if recipe.build_systems else language
             for recipe in _recipes for language in recipe.languages]
    return ", ".join(names[:-1]) + f" and {names[-1]}" if len(names) > 1 else "".join(names)


def recipe_for(language: str) -> LanguageRecipe:
    """The recipe of `language`; UnsupportedLanguageError when none is registered for it."""
    for recipe in _recipes:
        if language in recipe.languages:
            return recipe
    raise UnsupportedLanguageError(f"no environment recipe for {language} (there are recipes for {_offered()})")


def recipe_of(analysis: RepoAnalysis) -> LanguageRecipe:
    """The recipe that builds `analysis`; UnsupportedLanguageError, the one reason every backend
    gives, when none does (no recipe for its language, or not for its build system)."""
    recipe = next((recipe for recipe in _recipes if analysis.language in recipe.languages), None)
    if recipe is None or not recipe.supports(analysis):
        raise UnsupportedLanguageError(f"no environment recipe for {analysis.language} ({analysis.build_system}) yet, "
                                       f"on any backend (there are recipes for {_offered()})")
    return recipe


register(PythonRecipe())
register(NodeRecipe())
register(GoRecipe())
register(RustRecipe())
register(JavaRecipe())
register(NativeRecipe())
