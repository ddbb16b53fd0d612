"""The P4_16 grammar of the language specification (appendix "P4 grammar", spec 1.2.x), as a
Lark grammar, to check that a generated program is syntactically P4_16.

This is a transcription, independent of `p4_syntax.py` (the interpreter's reader, which
accepts what the emitter writes): productions keep the spec's names and shapes; the bison
precedence declarations (`%left ...`) become one rule per precedence level, lowest first:
`?:`, `||`, `&&`, `==` `!=`, `<` `>` `<=` `>=`, `|`, `^`, `&`, `<<` `>>`, `++` `+` `-` `|+|`
`|-|`, `*` `/` `%`, prefix operators and casts, then postfix `[ ]`, calls and member access.
Like p4c's lexer, the tokenizer tells type names (`TYPE_IDENTIFIER`: types declared in the
program, in core.p4 and v1model.p4) from other identifiers, lexes `>>` as two `>` (so that
`lookahead<bit<8>>()` closes two type argument lists), and drops comments and `#include`
lines. What it proves: the text is derivable from the spec grammar. What it does not: types,
scoping, or anything p4c checks after parsing.
"""

from __future__ import annotations

import re

from lark import Lark, Token
from lark.lexer import Lexer

KEYWORDS = {
    "abstract", "action", "actions", "apply", "bool", "bit", "const", "control", "default",
    "else", "entries", "enum", "error", "exit", "extern", "false", "header", "header_union",
    "if", "in", "inout", "int", "key", "match_kind", "type", "out", "parser", "package",
    "return", "select", "state", "string", "struct", "switch", "table", "transition", "true",
    "tuple", "typedef", "varbit", "void", "list", "priority",
}
# Types core.p4 and v1model.p4 declare (what an #include would have made TYPE_IDENTIFIERs).
LIBRARY_TYPES = {
    "packet_in", "packet_out", "standard_metadata_t", "CounterType", "MeterType", "counter",
    "direct_counter", "meter", "direct_meter", "register", "action_profile", "action_selector",
    "HashAlgorithm", "CloneType", "Checksum16", "Parser", "VerifyChecksum", "Ingress", "Egress",
    "ComputeChecksum", "Deparser", "V1Switch",
}
PUNCT = [  # longest first
    ("MASK", "&&&"), ("RANGE", ".."), ("PP", "++"), ("SAT_ADD", "|+|"), ("SAT_SUB", "|-|"),
    ("AND", "&&"), ("OR", "||"), ("EQ", "=="), ("NE", "!="), ("LE", "<="), ("GE", ">="),
    ("SHL", "<<"), ("LBRACE", "{"), ("RBRACE", "}"), ("LPAREN", "("), ("RPAREN", ")"),
    ("LBRACKET", "["), ("RBRACKET", "]"), ("SEMI", ";"), ("COLON", ":"), ("COMMA", ","),
    ("DOT", "."), ("AT", "@"), ("ASSIGN", "="), ("LT", "<"), ("GT", ">"), ("NOT", "!"),
    ("COMPL", "~"), ("MINUS", "-"), ("PLUS", "+"), ("STAR", "*"), ("SLASH", "/"),
    ("PERCENT", "%"), ("BAND", "&"), ("BXOR", "^"), ("BOR", "|"), ("QUESTION", "?"),
]
_TOKEN = re.compile(r"""
    (?P<ws>\s+)
  | (?P<INTEGER>\d+[ws]0[xX][0-9a-fA-F_]+|\d+[ws]0[bB][01_]+|\d+[ws]0[oO][0-7_]+|\d+[ws]\d[\d_]*
              |0[xX][0-9a-fA-F_]+|0[bB][01_]+|0[oO][0-7_]+|\d[\d_]*)
  | (?P<STRING_LITERAL>"(?:[^"\\]|\\.)*")
  | (?P<word>[A-Za-z_][A-Za-z0-9_]*)
  | (?P<DONTCARE_>_(?![A-Za-z0-9_]))
""", re.X)

GRAMMAR = r"""
%declare INTEGER STRING_LITERAL IDENTIFIER TYPE_IDENTIFIER DONTCARE
%declare ABSTRACT ACTION ACTIONS APPLY BOOL BIT CONST CONTROL DEFAULT ELSE ENTRIES ENUM ERROR EXIT
%declare EXTERN FALSE HEADER HEADER_UNION IF IN INOUT INT KEY MATCH_KIND TYPE OUT PARSER PACKAGE
%declare RETURN SELECT STATE STRING STRUCT SWITCH TABLE TRANSITION TRUE TUPLE TYPEDEF VARBIT VOID
%declare LIST PRIORITY
%declare MASK RANGE PP SAT_ADD SAT_SUB AND OR EQ NE LE GE SHL LBRACE RBRACE LPAREN RPAREN
%declare LBRACKET RBRACKET SEMI COLON COMMA DOT AT ASSIGN LT GT NOT COMPL MINUS PLUS STAR SLASH
%declare PERCENT BAND BXOR BOR QUESTION

start: (declaration | SEMI)*

declaration: constant_declaration | extern_declaration | action_declaration
           | parser_declaration | type_declaration | control_declaration | instantiation
           | error_declaration | match_kind_declaration | function_declaration

non_type_name: IDENTIFIER | APPLY | KEY | ACTIONS | STATE | ENTRIES | TYPE | PRIORITY
name: non_type_name | TYPE_IDENTIFIER | LIST
non_table_kw_name: IDENTIFIER | TYPE_IDENTIFIER | APPLY | STATE | TYPE | PRIORITY

opt_annotations: annotation*
annotations: annotation+
annotation: AT name
          | AT name LPAREN annotation_body RPAREN
annotation_body: annotation_token*
annotation_token: INTEGER | STRING_LITERAL | name | COMMA | DOT | ASSIGN | MINUS | PLUS
                | LBRACKET annotation_body RBRACKET | LPAREN annotation_body RPAREN

parameter_list: (parameter (COMMA parameter)*)?
parameter: opt_annotations direction type_ref name (ASSIGN expression)?
direction: (IN | OUT | INOUT)?

package_type_declaration: opt_annotations PACKAGE name opt_type_parameters LPAREN parameter_list RPAREN
instantiation: opt_annotations type_ref LPAREN argument_list RPAREN name SEMI
opt_constructor_parameters: (LPAREN parameter_list RPAREN)?
dot_prefix: DOT

// PARSER
parser_declaration: parser_type_declaration opt_constructor_parameters LBRACE parser_local_element* parser_state+ RBRACE
parser_local_element: constant_declaration | variable_declaration | instantiation
parser_type_declaration: opt_annotations PARSER name opt_type_parameters LPAREN parameter_list RPAREN
parser_state: opt_annotations STATE name LBRACE parser_statement* transition_statement RBRACE
parser_statement: assignment_or_method_call_statement | direct_application | parser_block_statement
                | constant_declaration | variable_declaration | empty_statement
parser_block_statement: opt_annotations LBRACE parser_statement* RBRACE
transition_statement: (TRANSITION state_expression)?
state_expression: name SEMI | select_expression
select_expression: SELECT LPAREN expression_list RPAREN LBRACE select_case* RBRACE
select_case: keyset_expression COLON name SEMI
keyset_expression: tuple_keyset_expression | simple_keyset_expression
tuple_keyset_expression: LPAREN simple_keyset_expression COMMA simple_expression_list RPAREN
                       | LPAREN reduced_simple_keyset_expression RPAREN
simple_expression_list: simple_keyset_expression (COMMA simple_keyset_expression)*
reduced_simple_keyset_expression: expression MASK expression | expression RANGE expression | DEFAULT | DONTCARE
simple_keyset_expression: expression | DEFAULT | DONTCARE | expression MASK expression | expression RANGE expression

// CONTROL
control_declaration: control_type_declaration opt_constructor_parameters LBRACE control_local_declaration* APPLY control_body RBRACE
control_type_declaration: opt_annotations CONTROL name opt_type_parameters LPAREN parameter_list RPAREN
control_local_declaration: constant_declaration | action_declaration | table_declaration
                         | instantiation | variable_declaration
control_body: block_statement

// EXTERN
extern_declaration: opt_annotations EXTERN non_type_name opt_type_parameters LBRACE method_prototype* RBRACE
                  | opt_annotations EXTERN function_prototype SEMI
function_prototype: type_or_void name opt_type_parameters LPAREN parameter_list RPAREN
method_prototype: opt_annotations function_prototype SEMI
                | opt_annotations TYPE_IDENTIFIER LPAREN parameter_list RPAREN SEMI

// TYPES
type_ref: base_type | type_name | specialized_type | header_stack_type | tuple_type
named_type: type_name | specialized_type
prefixed_type: TYPE_IDENTIFIER | dot_prefix TYPE_IDENTIFIER
type_name: prefixed_type
tuple_type: TUPLE LT type_argument_list GT
header_stack_type: type_name LBRACKET expression RBRACKET
specialized_type: prefixed_type LT type_argument_list GT
base_type: BOOL | ERROR | STRING | BIT | INT
         | BIT LT INTEGER GT | INT LT INTEGER GT | VARBIT LT INTEGER GT
         | BIT LT LPAREN expression RPAREN GT | INT LT LPAREN expression RPAREN GT
         | VARBIT LT LPAREN expression RPAREN GT
type_or_void: type_ref | VOID | IDENTIFIER
opt_type_parameters: (LT type_parameter_list GT)?
type_parameter_list: name (COMMA name)*
type_arg: DONTCARE | type_ref | non_type_name | VOID
type_argument_list: (type_arg (COMMA type_arg)*)?

type_declaration: derived_type_declaration | typedef_declaration
                | parser_type_declaration SEMI | control_type_declaration SEMI
                | package_type_declaration SEMI
derived_type_declaration: header_type_declaration | header_union_declaration
                        | struct_type_declaration | enum_declaration
header_type_declaration: opt_annotations HEADER name opt_type_parameters LBRACE struct_field* RBRACE
header_union_declaration: opt_annotations HEADER_UNION name opt_type_parameters LBRACE struct_field* RBRACE
struct_type_declaration: opt_annotations STRUCT name opt_type_parameters LBRACE struct_field* RBRACE
struct_field: opt_annotations type_ref name SEMI
enum_declaration: opt_annotations ENUM name LBRACE identifier_list COMMA? RBRACE
                | opt_annotations ENUM type_ref name LBRACE specified_identifier_list COMMA? RBRACE
error_declaration: ERROR LBRACE identifier_list RBRACE
match_kind_declaration: MATCH_KIND LBRACE identifier_list COMMA? RBRACE
identifier_list: name (COMMA name)*
specified_identifier_list: specified_identifier (COMMA specified_identifier)*
specified_identifier: name ASSIGN initializer
typedef_declaration: opt_annotations TYPEDEF (type_ref | derived_type_declaration) name SEMI
                   | opt_annotations TYPE (type_ref | derived_type_declaration) name SEMI

// STATEMENTS
assignment_or_method_call_statement: lvalue LPAREN argument_list RPAREN SEMI
                                   | lvalue LT type_argument_list GT LPAREN argument_list RPAREN SEMI
                                   | lvalue ASSIGN expression SEMI
empty_statement: SEMI
return_statement: RETURN expression? SEMI
exit_statement: EXIT SEMI
conditional_statement: IF LPAREN expression RPAREN statement (ELSE statement)?
direct_application: type_name DOT APPLY LPAREN argument_list RPAREN SEMI
statement: assignment_or_method_call_statement | direct_application | conditional_statement
         | empty_statement | block_statement | exit_statement | return_statement | switch_statement
block_statement: opt_annotations LBRACE statement_or_declaration* RBRACE
switch_statement: SWITCH LPAREN expression RPAREN LBRACE switch_case* RBRACE
switch_case: switch_label COLON block_statement | switch_label COLON
switch_label: DEFAULT | non_brace_expression
statement_or_declaration: variable_declaration | constant_declaration | statement | instantiation

// TABLES
table_declaration: opt_annotations TABLE name LBRACE table_property+ RBRACE
table_property: KEY ASSIGN LBRACE key_element* RBRACE
              | ACTIONS ASSIGN LBRACE (action_ref SEMI)* RBRACE
              | opt_annotations CONST? ENTRIES ASSIGN LBRACE entry* RBRACE
              | opt_annotations CONST? non_table_kw_name ASSIGN initializer SEMI
key_element: expression COLON name opt_annotations SEMI
entry: CONST? (PRIORITY ASSIGN INTEGER COLON)? keyset_expression COLON action_ref opt_annotations SEMI
action_ref: opt_annotations name | opt_annotations name LPAREN argument_list RPAREN

// ACTION
action_declaration: opt_annotations ACTION name LPAREN parameter_list RPAREN block_statement

// VARIABLES
variable_declaration: annotations type_ref name opt_initializer SEMI
                    | type_ref name opt_initializer SEMI
constant_declaration: opt_annotations CONST type_ref name ASSIGN initializer SEMI
opt_initializer: (ASSIGN initializer)?
initializer: expression

// EXPRESSIONS
function_declaration: annotations? function_prototype block_statement
argument_list: (argument (COMMA argument)*)?
argument: expression | name ASSIGN expression | DONTCARE | name ASSIGN DONTCARE
expression_list: (expression (COMMA expression)*)?
member: name
prefixed_non_type_name: non_type_name | dot_prefix non_type_name
lvalue: prefixed_non_type_name | THIS_ | lvalue DOT member
      | lvalue LBRACKET expression RBRACKET | lvalue LBRACKET expression COLON expression RBRACKET
%declare THIS_

?expression: ternary
?non_brace_expression: ternary
?ternary: lor | lor QUESTION expression COLON ternary
?lor: land | lor OR land
?land: equality | land AND equality
?equality: relational | equality (EQ | NE) relational
?relational: bor | relational (LT | GT | LE | GE) bor
?bor: bxor | bor BOR bxor
?bxor: band | bxor BXOR band
?band: shift | band BAND shift
?shift: additive | shift SHL additive | shift GT GT additive
?additive: multiplicative | additive (PP | PLUS | MINUS | SAT_ADD | SAT_SUB) multiplicative
?multiplicative: prefix | multiplicative (STAR | SLASH | PERCENT) prefix
?prefix: postfix | (NOT | COMPL | MINUS | PLUS) prefix | LPAREN type_ref RPAREN prefix
?postfix: primary
        | postfix LBRACKET expression RBRACKET
        | postfix LBRACKET expression COLON expression RBRACKET
        | postfix DOT member
        | postfix LPAREN argument_list RPAREN
        | postfix LT type_argument_list GT LPAREN argument_list RPAREN
        | named_type LPAREN argument_list RPAREN
primary: INTEGER | TRUE | FALSE | STRING_LITERAL | non_type_name | dot_prefix non_type_name
       | LBRACE expression_list RBRACE | LPAREN expression RPAREN
       | type_name DOT member | ERROR DOT member
"""


def type_names(program: str) -> set[str]:
    """Types the program declares (header, header_union, struct, enum, extern, parser,
    control, package, typedef/type), plus those of core.p4 and v1model.p4."""
    code = strip(program)
    names = set(LIBRARY_TYPES)
    names |= set(re.findall(r"\b(?:header|header_union|struct|enum|extern|parser|control|package)"
                            r"\s+(?:bit\s*<\s*\d+\s*>\s+)?([A-Za-z_]\w*)", code))
    names |= set(re.findall(r"\b(?:typedef|type)\b[^;]*?\b([A-Za-z_]\w*)\s*;", code))
    return names - KEYWORDS


def strip(program: str) -> str:
    """Comments and preprocessor lines out (p4c runs the C preprocessor first)."""
    program = re.sub(r"/\*.*?\*/", " ", program, flags=re.S)
    program = re.sub(r"//[^\n]*", "", program)
    return re.sub(r"^\s*#[^\n]*", "", program, flags=re.M)


class _P4Lexer(Lexer):
    def __init__(self, lexer_conf):
        pass

    def lex(self, data):  # data: (text, types)
        text, types = data
        pos, line = 0, 1
        while pos < len(text):
            m = _TOKEN.match(text, pos)
            if m and m.lastgroup != "ws" or (m and m.group("ws")):
                kind = m.lastgroup
                value = m.group(kind)
                if kind == "ws":
                    line += value.count("\n")
                    pos = m.end()
                    continue
                if kind == "DONTCARE_":
                    yield Token("DONTCARE", value, line=line)
                elif kind == "word":
                    if value == "this":
                        yield Token("THIS_", value, line=line)
                    elif value in KEYWORDS:
                        yield Token(value.upper(), value, line=line)
                    elif value in types:
                        yield Token("TYPE_IDENTIFIER", value, line=line)
                    else:
                        yield Token("IDENTIFIER", value, line=line)
                else:
                    yield Token(kind, value, line=line)
                pos = m.end()
                continue
            for kind, p in PUNCT:
                if text.startswith(p, pos):
                    yield Token(kind, p, line=line)
                    pos += len(p)
                    break
            else:
                raise SyntaxError(f"line {line}: unexpected character {text[pos]!r}")


_PARSER = None


def parse(program: str):
    """The parse tree of `program` under the spec grammar; raises on a syntax error."""
    global _PARSER
    if _PARSER is None:
        _PARSER = Lark(GRAMMAR, parser="earley", lexer=_P4Lexer, ambiguity="resolve")
    return _PARSER.parse((strip(program), type_names(program)))
